// Runs inside the Emscripten factory before the runtime starts (linked with --pre-js).
// The pthread pool size (threaded builds): the host may set Module.ptlPoolSize; default 4.
Module['ptlPoolSize'] = Module['ptlPoolSize'] || 4;
