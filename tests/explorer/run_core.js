// Runs the explorer's WebAssembly core (explorer_core.js, cmake/explorer_core.cmake) in Node.js, as the
// page does: one request per line of standard input ({"input": the input's text, "engine", "dtype",
// "block_q", "block_k", "backward"}: attn_explore's settings), one line of JSON out for each:
// {"status": attn_explore's return, "trace": the trace's text, "error": the error line, "ms": the call's time}.
// usage: node run_core.js EXPLORER_CORE_JS < requests.jsonl
"use strict";
const fs = require("fs");
const path = require("path");

const factory = require(path.resolve(process.argv[2]));
factory().then((core) => {
  const explore = core.cwrap("attn_explore", "number", ["string", "string"]);
  const result = (part) => core.UTF8ToString(core.ccall("attn_result", "number", ["number"], [part]));
  const lines = fs.readFileSync(0, "utf8").split("\n").filter((line) => line.trim() !== "");
  for (const line of lines) {
    const start = process.hrtime.bigint();
    const r = JSON.parse(line);
    const settings = {engine: r.engine || "both", dtype: r.dtype || "float32", block_q: r.block_q || null,
                      block_k: r.block_k || null, backward: !!r.backward};
    const status = explore(r.input, JSON.stringify(settings));
    const ms = Number(process.hrtime.bigint() - start) / 1e6;
    const out = {status, ms, trace: status === 0 ? result(0) : "", error: status === 0 ? "" : result(3)};
    fs.writeSync(1, JSON.stringify(out) + "\n");
  }
});
