// The Hugging Face loader against local stand-ins for the datasets-server /rows API: one that
// answers like it (pages of 100 rows, CORS), and failures: a private dataset, a wrong name, a
// wrong column, and no server at all.
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, test } from 'node:test';

import { openSite, shoot, waitReady } from './helpers.mjs';

const ROWS = 250; // three pages
const rowText = (i) => `Story ${i}: once upon a time there was a byte-level model that read every letter of this line.`;
let server, api, deadApi;

before(async () => {
  server = http.createServer((req, res) => {
    const url = new URL(req.url, 'http://x');
    const send = (status, body) => {
      res.writeHead(status, { 'content-type': 'application/json', 'access-control-allow-origin': '*' });
      res.end(JSON.stringify(body));
    };
    if (url.pathname !== '/rows') return send(404, { error: 'Not found.' });
    const dataset = url.searchParams.get('dataset');
    if (dataset === 'someone/private')
      return send(401, {
        error:
          'The dataset does not exist, or is not accessible without authentication (private or gated). Please check the spelling of the dataset name or retry with authentication.',
      });
    if (
      dataset !== 'local/stories' ||
      url.searchParams.get('config') !== 'default' ||
      url.searchParams.get('split') !== 'train'
    )
      return send(404, { error: 'The config or the split does not exist in the dataset' });
    const offset = Number(url.searchParams.get('offset'));
    const length = Math.min(100, Number(url.searchParams.get('length')));
    const rows = [];
    for (let i = offset; i < Math.min(ROWS, offset + length); i++)
      rows.push({ row_idx: i, row: { text: rowText(i), id: i }, truncated_cells: [] });
    send(200, {
      features: [{ feature_idx: 0, name: 'text', type: { dtype: 'string', _type: 'Value' } }],
      rows,
      num_rows_total: ROWS,
      num_rows_per_page: 100,
      partial: false,
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  api = `http://127.0.0.1:${server.address().port}`;
  // A port nobody listens on (taken, then released): "no network" as the page sees it.
  const probe = http.createServer();
  await new Promise((r) => probe.listen(0, '127.0.0.1', r));
  deadApi = `http://127.0.0.1:${probe.address().port}`;
  await new Promise((r) => probe.close(r));
});
after(() => server.close());

async function load(page, fields) {
  await page.check('input[name="corpus"][value="hf"]');
  await page.evaluate(() => (document.querySelector('#hf-box details').open = true));
  for (const [id, v] of Object.entries(fields)) await page.fill(`#${id}`, v);
  await page.click('#hf-load');
}

test('Hugging Face loader: reads every page within the budget, shows progress, then trains on it', async () => {
  const s = await openSite({
    ignore: [/HTTP 40[14]/, /status of 40[14]/, /ERR_CONNECTION_REFUSED/, /request failed: .*\/rows\?/],
  });
  const { page } = s;
  try {
    await waitReady(page);
    await load(page, {
      'hf-api': api,
      'hf-dataset': 'local/stories',
      'hf-config': 'default',
      'hf-split': 'train',
      'hf-column': 'text',
      'hf-budget': '1',
    });
    await page.waitForFunction(() => (document.body.dataset.corpus ?? '').startsWith('hf:'));
    const expected = Array.from({ length: ROWS }, (_, i) => rowText(i)).join('\n\n').length;
    const info = await page.textContent('#corpus-info');
    assert.match(info, /^hf:local\/stories\/default\/train:text: /);
    assert.ok(
      info.includes(`${expected.toLocaleString('en-US')} bytes`),
      `all ${ROWS} rows joined (${expected} bytes): ${info}`,
    );
    await shoot(page, 'datasets-loaded-1440');

    // A budget smaller than the split stops early.
    await load(page, { 'hf-budget': '0.01' });
    await page.waitForFunction(() => /hf:.*: 10,000 bytes/.test(document.getElementById('corpus-info').textContent));

    // Failures name the problem.
    const failing = async (fields, re) => {
      await load(page, fields);
      await page.waitForFunction(
        (src) => new RegExp(src).test(document.getElementById('status').textContent),
        re.source,
      );
      assert.equal(await page.getAttribute('#status', 'class'), 'status error');
      // The error also stands next to the control, with the text that training keeps using.
      assert.match(await page.textContent('#corpus-info'), /Training still uses hf:local\/stories/);
    };
    await failing({ 'hf-dataset': 'someone/private', 'hf-budget': '1' }, /private or gated/);
    await shoot(page, 'datasets-private-1440');
    await failing({ 'hf-dataset': 'local/nope' }, /was not found \(check the dataset, config and split names\)/);
    await failing({ 'hf-dataset': 'local/stories', 'hf-column': 'body' }, /has no column 'body' \(columns: text, id\)/);
    await failing(
      { 'hf-api': deadApi, 'hf-column': 'text' },
      new RegExp(`could not reach ${deadApi.replace(/[.]/g, '\\.')}`),
    );
    s.assertNoErrors('the playground (datasets)');
  } finally {
    await s.close();
  }
});
