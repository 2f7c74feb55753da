// The explorer's structural edits (src/render/pages/explorer/explorer_edits.js and explorer_mask.js) on every
// bundled example (data/*.json): for each edit, the argument must be unchanged, `attn-trace run` must take
// the result (with --backward; forward alone for some), shape() must give the sizes the edit asked for and
// the tool's config reports, the numbers that kept their place must be equal, allowed() must hide exactly
// what the tool's `masked` step holds as -inf, a toggled cell must change exactly one decision, and the same
// seed must give the same numbers. One line per failure, then a count; exit status 1 on any failure.
// usage: node tests/explorer/edits_test.js ATTN_TRACE SOURCE_DIR
"use strict";
const assert = require("assert");
const fs = require("fs");
const path = require("path");
const vm = require("vm");
const { spawnSync } = require("child_process");

const [tool, source] = process.argv.slice(2);
if (!tool || !source) {
  console.error("usage: node edits_test.js ATTN_TRACE SOURCE_DIR");
  process.exit(2);
}
// The two scripts as the page loads them, in order, in this realm (so that deepStrictEqual compares their
// arrays with ours).
for (const name of ["explorer_mask.js", "explorer_edits.js"]) {
  const file = path.join(source, "src", "render", "pages", "explorer", name);
  vm.runInThisContext(fs.readFileSync(file, "utf8"), { filename: file });
}
const E = globalThis.AttnEdits;
const Mask = globalThis.AttnMask;

let failures = 0;
let checks = 0;
let runs = 0;
function check(ok, what) {
  checks += 1;
  if (!ok) {
    failures += 1;
    console.log("FAIL " + what);
  }
  return ok;
}
function same(a, b) {
  try {
    assert.deepStrictEqual(a, b);
    return true;
  } catch (e) {
    return false;
  }
}

// `attn-trace run - --json -` on the input, with more options: {status, trace, error}.
function run(input, options) {
  runs += 1;
  const r = spawnSync(tool, ["run", "-", "--json", "-"].concat(options), {
    input: JSON.stringify(input), encoding: "utf8", maxBuffer: 1 << 28
  });
  return { status: r.status, trace: r.status === 0 ? JSON.parse(r.stdout) : null, error: (r.stderr || "").trim() };
}

// -- what the weights hold, in either layout --------------------------------------------------------------

function outputOf(w, layout, c) { return layout === "out_in" ? w[c] : w.map((r) => r[c]); }
function inputOf(w, layout, r) { return layout === "out_in" ? w.map((row) => row[r]) : w[r]; }
function items(x) { return Array.isArray(x[0][0]) ? x : [x]; }

// Places (head, k) of a head-major list that survive from `was` to `now` ({heads, width}) hold the same.
function keptBlocks(get, was, now, what) {
  for (let h = 0; h < Math.min(was.heads, now.heads); h++) {
    for (let k = 0; k < Math.min(was.width, now.width); k++) {
      if (!check(same(get.before(h * was.width + k), get.after(h * now.width + k)),
                 `${what}: head ${h} place ${k} changed`)) return;
    }
  }
}

// Every surviving head block of every weight, bias and per-head list after a change of sizes.
function checkHeadBlocks(b, a, sb, sa, what) {
  const L = sb.layout;
  const q = [{ heads: sb.h, width: sb.d_k }, { heads: sa.h, width: sa.d_k }];
  const kv = [{ heads: sb.g, width: sb.d_k }, { heads: sa.g, width: sa.d_k }];
  const v = [{ heads: sb.g, width: sb.d_v }, { heads: sa.g, width: sa.d_v }];
  const o = [{ heads: sb.h, width: sb.d_v }, { heads: sa.h, width: sa.d_v }];
  const one = [{ heads: sb.h, width: 1 }, { heads: sa.h, width: 1 }];
  const pairs = [["W_q", q, outputOf], ["W_k", kv, outputOf], ["W_v", v, outputOf], ["W_o", o, inputOf]];
  for (const [key, [was, now], pick] of pairs) {
    if (b[key] === undefined) continue;
    keptBlocks({ before: (c) => pick(b[key], L, c), after: (c) => pick(a[key], L, c) }, was, now, `${what}: ${key}`);
  }
  for (const [key, [was, now]] of [["b_q", q], ["b_k", kv], ["b_v", v], ["sinks", one], ["alibi", one]]) {
    if (!Array.isArray(b[key])) continue;
    keptBlocks({ before: (c) => b[key][c], after: (c) => a[key][c] }, was, now, `${what}: ${key}`);
  }
  if (b.dY !== undefined && b.W_o === undefined) {
    items(b.dY).forEach((dy, it) => dy.forEach((r, i) => {
      keptBlocks({ before: (c) => r[c], after: (c) => items(a.dY)[it][i][c] }, o[0], o[1], `${what}: dY`);
    }));
  }
  check(sa.h % sa.g === 0, `${what}: n_kv_heads ${sa.g} does not divide n_heads ${sa.h}`);
}

// Rows of a sequence (per item) after a row was inserted at `at` (or removed, `removed`).
function keptRows(before, after, at, removed, what) {
  if (before === undefined) return;
  items(before).forEach((x, it) => x.forEach((r, i) => {
    if (removed && i === at) return;
    const j = removed ? (i < at ? i : i - 1) : (i < at ? i : i + 1);
    check(same(items(after)[it][j], r), `${what}: row ${i} of item ${it} moved or changed`);
  }));
}

function seededRow(r, width, what) {
  check(r.length === width && r.every((v) => v >= -1 && v <= 1 && Math.round(v * 100) / 100 === v),
        `${what}: the new row ${JSON.stringify(r)} is not ${width} numbers of two decimals in [-1, 1]`);
}

// -- the mask -------------------------------------------------------------------------------------------------

// allowed() as one matrix per batch item (a shared matrix repeated).
function perItem(input, s) {
  const a = E.allowed(input);
  const count = Math.max(s.batch, 1);
  if (Array.isArray(a[0][0])) return a;
  return Array.from({ length: count }, () => a);
}

// The tool's `masked` step holds -inf exactly where allowed() is false, in every item and head.
function checkMasked(input, trace, what) {
  const s = E.shape(input);
  const a = perItem(input, s);
  const step = trace.steps.find((x) => x.name === "masked");
  if (!check(step !== undefined, `${what}: the trace has no masked step`)) return;
  const data = s.batch ? step.data : [step.data];
  let wrong = 0;
  data.forEach((heads, b) => heads.forEach((rows) => rows.forEach((r, i) => r.forEach((v, j) => {
    if ((v === "-inf") === a[b][i][j]) wrong += 1;
  }))));
  check(wrong === 0, `${what}: allowed() disagrees with the tool's masked step in ${wrong} places`);
}

// The number of decisions that differ between two inputs of the same sizes.
function changedDecisions(x, y) {
  const s = E.shape(x);
  const a = perItem(x, s);
  const b = perItem(y, s);
  let changed = 0;
  a.forEach((m, it) => m.forEach((r, i) => r.forEach((v, j) => { if (v !== b[it][i][j]) changed += 1; })));
  return changed;
}

// -- one case -------------------------------------------------------------------------------------------------

const TOKEN_KEYS = ["X", "tokens", "dY", "mask", "rope"];
const HEAD_KEYS = ["W_q", "W_k", "W_v", "W_o", "b_q", "b_k", "b_v", "dY", "sinks", "alibi", "rope", "n_heads",
  "n_kv_heads"];
let caseNumber = 0;

// Applies `edit` to `input` and checks the generic properties: the argument unchanged, the key order and the
// untouched keys, the tool's acceptance and config, the mask against the tool, determinism. `touches` names
// the top-level keys the edit may change; `sizes` the sizes shape() must then give; `more(before, after, s0,
// s1, trace)` the edit's own checks. Returns the result (or null when the edit threw).
function edit(label, input, e) {
  caseNumber += 1;
  const what = label + ": " + e.name;
  const snapshot = JSON.parse(JSON.stringify(input));
  let out;
  try {
    out = e.apply(input, 11);
  } catch (err) {
    check(false, `${what}: threw ${err.message}`);
    return null;
  }
  check(same(input, snapshot), `${what}: the argument was changed`);
  check(out !== input, `${what}: returned its argument, not a copy`);
  const kept = Object.keys(input).filter((k) => k in out);
  check(same(Object.keys(out).slice(0, kept.length), kept), `${what}: the keys' order changed`);
  for (const k of kept) {
    if (!(e.touches || []).includes(k)) check(same(out[k], input[k]), `${what}: the untouched key ${k} changed`);
  }
  if (e.apply.length > 1) {
    check(same(e.apply(input, 11), out), `${what}: the same seed gave other numbers`);
    if (e.seeded) check(!same(e.apply(input, 12), out), `${what}: another seed gave the same numbers`);
  }
  const s0 = E.shape(input);
  const s1 = E.shape(out);
  for (const [k, v] of Object.entries(e.sizes ? e.sizes(s0) : {})) {
    check(s1[k] === v, `${what}: shape() says ${k} = ${s1[k]}, expected ${v}`);
  }
  const r = run(out, ["--backward"]);
  if (!check(r.status === 0, `${what}: run --backward exited ${r.status}: ${r.error}`)) return out;
  if (caseNumber % 10 === 0) {
    const f = run(out, []);
    check(f.status === 0, `${what}: run exited ${f.status}: ${f.error}`);
  }
  const c = r.trace.config;
  const expect = { n: s1.n, m: s1.m, batch: s1.batch || null, d_model: s1.d_model,
    d_context: s1.cross ? s1.d_context : s1.d_model, d_k: s1.d_k, d_v: s1.d_v,
    d_out: s1.d_out || s1.h * s1.d_v, n_heads: s1.h, n_kv_heads: s1.g };
  for (const [k, v] of Object.entries(expect)) check(c[k] === v, `${what}: the tool's ${k} is ${c[k]}, shape() ${v}`);
  checkMasked(out, r.trace, what);
  try {
    if (e.more) e.more(input, out, s0, s1, r.trace, what);
  } catch (err) {
    check(false, `${what}: its checks stopped: ${err.message}`);
  }
  return out;
}

function throws(label, name, f, pattern) {
  try {
    f();
  } catch (err) {
    check(pattern.test(err.message) && !err.message.includes("\n"),
          `${label}: ${name}: the message ${JSON.stringify(err.message)} is not the expected one line`);
    return;
  }
  check(false, `${label}: ${name}: should throw`);
}

// -- the edits ----------------------------------------------------------------------------------------------

const UNICODE = "猫 — ü 🐈";

function tokenEdits(s) {
  const out = [];
  for (const at of [0, Math.floor(s.n / 2), s.n]) {
    out.push({
      name: `addToken at ${at}`, touches: TOKEN_KEYS, seeded: true,
      apply: (x, seed) => E.addToken(x, at, seed),
      sizes: (s0) => ({ n: s0.n + 1, m: s0.cross ? s0.m : s0.n + 1 }),
      more: (b, a, s0, s1, trace, what) => {
        keptRows(b.X, a.X, at, false, what + ": X");
        keptRows(b.dY, a.dY, at, false, what + ": dY");
        items(a.X).forEach((x) => seededRow(x[at], s0.d_model, what));
        if (b.tokens !== undefined) {
          const lists = Array.isArray(a.tokens[0]) ? a.tokens : [a.tokens];
          check(lists.every((l) => /^new[0-9]*$/.test(l[at]) && l.indexOf(l[at]) === at),
                `${what}: the new label is not a fresh "new…"`);
        }
        if (!s0.cross && Mask.kindOf(b.mask) === "padding") {  // a new token is a real key
          const lists = Array.isArray(a.mask.keep[0]) ? a.mask.keep : [a.mask.keep];
          check(lists.every((l) => l[at] === 1), `${what}: the new key's padding flag is not 1`);
        }
        if (!s0.cross && Mask.kindOf(b.mask) !== "sliding_window") {  // every old pair keeps its decision
          const pa = perItem(b, s0);
          const pb = perItem(a, s1);
          const to = (k) => (k < at ? k : k + 1);
          let moved = 0;
          pa.forEach((m, it) => m.forEach((r, i) => r.forEach((v, j) => { if (pb[it][to(i)][to(j)] !== v) moved++; })));
          check(moved === 0, `${what}: ${moved} decisions of old token pairs changed`);
        }
      }
    });
  }
  const i = Math.floor((s.n - 1) / 2);
  out.push({
    name: `removeToken ${i}`, touches: TOKEN_KEYS, apply: (x) => E.removeToken(x, i),
    sizes: (s0) => ({ n: s0.n - 1, m: s0.cross ? s0.m : s0.n - 1 }),
    more: (b, a, s0, s1, trace, what) => {
      keptRows(b.X, a.X, i, true, what + ": X");
      keptRows(b.dY, a.dY, i, true, what + ": dY");
    }
  });
  out.push({
    name: "renameToken", touches: ["tokens"], apply: (x) => E.renameToken(x, s.n - 1, UNICODE),
    more: (b, a, s0, s1, trace, what) => {
      const t = trace.input.tokens;
      const last = (Array.isArray(t[0]) ? t : [t]).every((l) => l[s.n - 1] === UNICODE);
      check(last, `${what}: the tool's tokens do not end in the new name: ${JSON.stringify(t)}`);
    }
  });
  return out.filter((e) => !(e.name.startsWith("removeToken") && s.n === 1));
}

function contextEdits(s) {
  if (!s.cross) return [];
  const sized = (d) => (s0) => ({ n: s0.n, m: s0.m + d });
  const touches = ["context", "mask", "rope"];
  return [
    { name: "addContextToken at 0", touches, seeded: true, apply: (x, seed) => E.addContextToken(x, 0, seed),
      sizes: sized(1), more: (b, a, s0, s1, t, what) => keptRows(b.context.X, a.context.X, 0, false, what) },
    { name: "addContextToken at the end", touches, seeded: true, sizes: sized(1),
      apply: (x, seed) => E.addContextToken(x, s.m, seed),
      more: (b, a, s0, s1, t, what) => check(same(a.context.X.slice(0, s.m), b.context.X), what + ": rows moved") },
    { name: "removeContextToken 1", touches, apply: (x) => E.removeContextToken(x, 1), sizes: sized(-1),
      more: (b, a, s0, s1, t, what) => keptRows(b.context.X, a.context.X, 1, true, what) },
    { name: "renameContextToken", touches: ["context"], apply: (x) => E.renameContextToken(x, 0, UNICODE),
      more: (b, a, s0, s1, trace, what) => {
        const t = trace.input.context.tokens;
        check((Array.isArray(t[0]) ? t : [t]).every((l) => l[0] === UNICODE), `${what}: tools' labels ${t}`);
      } }
  ];
}

function sizeEdits(s) {
  const out = [];
  const heads = (h) => ({
    name: `setHeads ${h}`, touches: HEAD_KEYS, seeded: h > s.h, apply: (x, seed) => E.setHeads(x, h, seed),
    sizes: (s0) => ({ h, d_k: s0.d_k, d_v: s0.d_v }),
    more: (b, a, s0, s1, t, what) => {
      const g = s0.g === s0.h ? h : h % s0.g === 0 ? s0.g : null;
      if (g !== null) check(s1.g === g, `${what}: n_kv_heads became ${s1.g}, expected ${g}`);
      check(s1.g <= s0.g || s0.g === s0.h, `${what}: n_kv_heads grew from ${s0.g} to ${s1.g}`);
      checkHeadBlocks(b, a, s0, s1, what);
      check(("n_heads" in a) === ("n_heads" in b || h !== 1), `${what}: n_heads written or dropped wrongly`);
    }
  });
  out.push(heads(s.h + 1));
  if (s.g < s.h) out.push(heads(2 * s.h));  // grouped heads keep their g
  if (s.h > 1) out.push(heads(s.h - 1));
  // A size set by `f` to `d` (larger than before when `grows`): the surviving head blocks stay.
  const size = (name, f, d, grows, sizes) => ({ name: `${name} ${d}`, touches: HEAD_KEYS, seeded: grows,
    apply: (x, seed) => f(x, d, seed), sizes, more: (b, a, s0, s1, t, what) => checkHeadBlocks(b, a, s0, s1, what) });
  for (let g = 1; g <= s.h; g++) {
    if (s.h % g === 0 && g !== s.g) out.push(size("setKvHeads", E.setKvHeads, g, g > s.g, () => ({ h: s.h, g })));
  }
  for (const d of [s.d_k + 1, s.d_k - 1]) {
    if (d >= 1 && !(d < 2 && s.rope)) out.push(size("setDk", E.setDk, d, d > s.d_k, () => ({ d_k: d })));
  }
  const dv = s.odd || s.d_v === 1 ? s.d_v + 2 : s.d_v - 1;  // up or down, by example
  out.push(size("setDv", E.setDv, dv, dv > s.d_v, () => ({ d_v: dv })));
  return out;
}

function maskEdits(s) {
  const causal = s.odd ? ["causal"] : ["causal", { align: "bottom_right" }];
  const kinds = [["none"], causal, ["sliding_window", { window: 2 }],
    ["padding", { keep: Array.from({ length: s.m }, (v, j) => (j === 0 && s.m > 1 ? 0 : 1)) }], ["custom"]];
  if (s.batch) kinds.push(["padding", { keep: Array.from({ length: s.batch }, (v, b) => Array.from({ length: s.m },
    (w, j) => (j === s.m - 1 - b ? 0 : 1))) }]);
  const out = kinds.map(([kind, options]) => ({
    name: `setMask ${kind} ${JSON.stringify(options || {})}`, touches: ["mask"],
    apply: (x) => E.setMask(x, kind, options),
    more: (b, a, s0, s1, t, what) => {
      if (kind === "custom") check(changedDecisions(b, a) === 0, `${what}: switching to custom changed decisions`);
    }
  }));
  const cells = s.odd ? [[s.n - 1, 0, undefined]] : [[0, s.m - 1, s.batch ? s.batch - 1 : undefined]];
  for (const [i, j, item] of cells) {
    out.push({
      name: `toggleMaskCell ${i} ${j} ${item}`, touches: ["mask"], apply: (x) => E.toggleMaskCell(x, i, j, item),
      more: (b, a, s0, s1, t, what) => {
        const n = changedDecisions(b, a);
        // A shared matrix (or, without an item, every item's) flips the one decision in each batch item.
        const expected = s.batch && item === undefined ? s.batch : 1;
        check(n === expected, `${what}: ${n} decisions changed, expected ${expected}`);
        const again = E.toggleMaskCell(a, i, j, item);
        check(changedDecisions(b, again) === 0, `${what}: toggling twice did not give the decisions back`);
      }
    });
  }
  return out;
}

function otherEdits(s, input) {
  const first = s.batch ? ["X", 0, 0, 0] : ["X", 0, 0];
  const slopes = Array.from({ length: s.h }, (v, k) => 1 / (k + 2));
  const out = [
    { name: "setScale 0.5", touches: ["scale"], apply: (x) => E.setScale(x, 0.5),
      more: (b, a, s0, s1, t, what) => check(t.config.scale === 0.5, `${what}: the tool's scale ${t.config.scale}`) },
    { name: "rope on", touches: ["rope"], apply: (x) => E.setRope(x, { theta: 100, style: "interleaved" }),
      more: (b, a, s0, s1, t, what) => check(t.steps.some((st) => st.name === "q_rot"), `${what}: no q_rot step`) },
    s.odd ? { name: "alibi on", touches: ["alibi"], apply: (x) => E.setAlibi(x, true) }
      : { name: "alibi slopes", touches: ["alibi"], apply: (x) => E.setAlibi(x, slopes),
        more: (b, a, s0, s1, t, what) => check(same(t.config.alibi.slopes, slopes), `${what}: the tool's slopes`) },
    s.odd ? { name: "softcap 5", touches: ["softcap"], apply: (x) => E.setSoftcap(x, 5) }
      : { name: "dropout", touches: ["dropout"], apply: (x) => E.setDropout(x, { p: 0.25, seed: 7 }),
        more: (b, a, s0, s1, t, what) => check(t.steps.some((st) => st.name === "dropped"), `${what}: no dropped`) },
    { name: "sinks seeded", touches: ["sinks"], seeded: true, apply: (x, seed) => E.setSinks(x, true, seed),
      more: (b, a, s0, s1, t, what) => check(same(t.config.sinks, a.sinks), `${what}: the tool's sinks differ`) },
    { name: "setNumber", touches: ["X"], apply: (x) => E.setNumber(x, first, 0.625),
      more: (b, a, s0, s1, t, what) => check(items(a.X)[0][0][0] === 0.625, `${what}: the number was not set`) }
  ];
  for (const key of ["rope", "alibi", "softcap", "sinks", "dropout", "scale"]) {
    if (input[key] === undefined) continue;
    const setter = { rope: E.setRope, alibi: E.setAlibi, softcap: E.setSoftcap, sinks: E.setSinks,
      dropout: E.setDropout, scale: E.setScale }[key];
    out.push({ name: key + " off", touches: [key], apply: (x) => setter(x, null),
      more: (b, a, s0, s1, t, what) => check(!(key in a), `${what}: ${key} is still there`) });
  }
  return out;
}

// Several edits in a row, each result the next one's argument.
function chainEdits(s) {
  const chain = (name, f) => ({ name, touches: TOKEN_KEYS.concat(HEAD_KEYS, ["scale"]), seeded: true, apply: f });
  return [
    chain("chain: addToken, setHeads, toggle, removeToken, setDk", (x, seed) => {
      let y = E.addToken(x, 1, seed);
      y = E.setHeads(y, E.shape(y).h + 1, seed);
      y = E.toggleMaskCell(y, 0, 0);
      y = E.removeToken(y, 0);
      return E.setDk(y, E.shape(y).d_k + 2, seed);
    }),
    chain("chain: scale, custom mask, two tokens, kv heads 1, d_v 1, alibi, remove", (x, seed) => {
      let y = E.setMask(E.setScale(x, 0.25), "custom");
      y = E.addToken(E.addToken(y, 0, seed), E.shape(y).n + 1, seed + 1);
      y = E.setDv(E.setKvHeads(y, 1, seed), 1, seed);
      y = E.setAlibi(y, true);
      y = E.removeToken(y, E.shape(y).n - 1);
      return E.setScale(y, null);
    })
  ];
}

// -- inputs -----------------------------------------------------------------------------------------------

// The input with a dY of its output's shape (0.1, 0.2, … by place), for the edits that must resize it.
function withDY(input) {
  const s = E.shape(input);
  const width = s.d_out || s.h * s.d_v;
  const matrix = () => Array.from({ length: s.n }, (v, i) => Array.from({ length: width }, (w, j) => (i + j + 1) / 10));
  const out = JSON.parse(JSON.stringify(input));
  out.dY = s.batch ? Array.from({ length: s.batch }, matrix) : matrix();
  return out;
}

// A group of checks; one that throws is a failure of its own, and the next group still runs.
function section(name, f) {
  try {
    f();
  } catch (err) {
    check(false, `${name}: stopped: ${err.message}`);
  }
}

const dataDir = path.join(source, "data");
const examples = fs.readdirSync(dataDir).filter((f) => f.endsWith(".json")).sort();
check(examples.length >= 17, `only ${examples.length} examples in data/`);
const started = Date.now();
for (const file of examples) {
  section(file, () => {
    const input = JSON.parse(fs.readFileSync(path.join(dataDir, file), "utf8"));
    const s = E.shape(input);
    s.rope = input.rope !== undefined;
    const base = run(input, []);
    check(base.status === 0, `${file}: the example itself is refused: ${base.error}`);
    s.odd = examples.indexOf(file) % 2 === 1;  // picks one of two variants of some edits
    const all = [].concat(tokenEdits(s), contextEdits(s), sizeEdits(s), maskEdits(s), otherEdits(s, input));
    for (const e of all.concat(chainEdits(s))) edit(file, input, e);
    if (["the_cat_sat.json", "padded_batch.json", "mqa.json"].includes(file)) {  // no W_o: dY follows h·d_v
      const dy = withDY(input);
      const sized = tokenEdits(s).slice(1, 4).concat(sizeEdits(s).filter((e) => !e.name.startsWith("setKvHeads")));
      for (const e of sized) edit(file + " with dY", dy, e);
    }
  });
}

// -- edits the format refuses, and edits checked without the tool ----------------------------------------------

const load = (name) => JSON.parse(fs.readFileSync(path.join(dataDir, name), "utf8"));
const cat = load("the_cat_sat.json");
const kv = load("kv_cache.json");
const llama = load("llama_layer.json");

section("refused edits", () => {
  const one = E.removeToken(E.removeToken(cat, 0), 0);
  throws("the_cat_sat", "removeToken of the last token", () => E.removeToken(one, 0), /^removeToken: .*last token/);
  throws("the_cat_sat", "addContextToken without a context", () => E.addContextToken(cat, 0), /^addContextToken: /);
  throws("the_cat_sat", "setMask casual", () => E.setMask(cat, "casual"), /^setMask: unknown mask kind/);
  throws("the_cat_sat", "toggleMaskCell out of range", () => E.toggleMaskCell(cat, 3, 0), /^toggleMaskCell: query 3/);
  throws("gqa", "setKvHeads 3", () => E.setKvHeads(load("gqa.json"), 3), /^setKvHeads: .*does not divide/);
  throws("gqa", "setAlibi of 3 slopes", () => E.setAlibi(load("gqa.json"), [1, 2, 3]), /^setAlibi: .*4 numbers/);
  throws("llama_layer", "setDk 1 with rope", () => E.setDk(load("llama_layer.json"), 1), /^setDk: rope/);
  let ctx1 = kv;
  while (E.shape(ctx1).m > 1) ctx1 = E.removeContextToken(ctx1, 0);
  throws("kv_cache", "removeContextToken of the last", () => E.removeContextToken(ctx1, 0), /last token/);
});

// setFeature, which the page's controls of the optional features call (explorer_structure.js, from the
// core's table): each feature through its own setter, the same input as that setter gives; a key with no
// setter of its own set or removed as given.
section("setFeature", () => {
  const gqa = load("gqa.json");
  const equal = (a, b) => JSON.stringify(a) === JSON.stringify(b);
  check(equal(E.setFeature(cat, "rope", {}), E.setRope(cat, {})), "setFeature rope {} is setRope's");
  check(equal(E.setFeature(gqa, "alibi", true), E.setAlibi(gqa, true)), "setFeature alibi true is setAlibi's");
  check(equal(E.setFeature(cat, "softcap", 5), E.setSoftcap(cat, 5)), "setFeature softcap 5 is setSoftcap's");
  check(equal(E.setFeature(gqa, "sinks", true), E.setSinks(gqa, true, 11)), "setFeature sinks true draws seed 11");
  check(equal(E.setFeature(cat, "dropout", { p: 0.5, seed: 0 }), E.setDropout(cat, { p: 0.5, seed: 0 })),
    "setFeature dropout is setDropout's");
  throws("the_cat_sat", "setFeature softcap 0", () => E.setFeature(cat, "softcap", 0), /^setSoftcap: /);
  const other = E.setFeature(cat, "temperature", { per_query: [1, 1, 1] });
  check(equal(other.temperature, { per_query: [1, 1, 1] }) && !("temperature" in cat),
    "setFeature of a key without a setter sets it on a copy");
  check(!("temperature" in E.setFeature(other, "temperature", null)), "setFeature null removes the key");
});

// A custom mask grows as its rule would: custom then a token = the rule with that token, in self-attention,
// wherever the rule keeps the decisions of the old pairs (a window moves apart the tokens around a new one,
// so for a window only at the start and the end).
section("custom masks grow as their rule", () => {
  const windows = [["gpt_causal.json", { type: "sliding_window", window: 3 }],
    ["the_cat_sat.json", { type: "sliding_window", window: 2 }]];
  for (const [file, mask] of [["gpt_causal.json"], ["sliding_window.json"], ["bert_bias.json"]].concat(windows)) {
    const x = mask ? E.setMask(load(file), mask.type, mask) : load(file);
    const n = E.shape(x).n;
    const places = Mask.kindOf(x.mask) === "sliding_window" ? [0, n] : [0, 1, n];
    for (const at of places) {
      const ruled = E.allowed(E.addToken(x, at));
      const grown = E.allowed(E.addToken(E.setMask(x, "custom"), at));
      check(same(grown, ruled), `${file}: a custom copy of its mask grew otherwise than the rule at ${at}`);
    }
  }
});

// Rope positions follow the tokens: counting lists keep counting, others take the next position.
section("rope positions", () => {
  const counted = E.addToken(E.setRope(llama, { positions: [3, 4, 5, 6, 7, 8] }), 2);
  check(same(counted.rope.positions, [3, 4, 5, 6, 7, 8, 9]), `llama_layer: positions ${counted.rope.positions}`);
  const spread = E.removeToken(E.addToken(E.setRope(llama, { positions: [0, 2, 4, 6, 8, 10] }), 2), 0);
  check(same(spread.rope.positions, [2, 3, 4, 6, 8, 10]), `llama_layer: positions ${spread.rope.positions}`);
  const cached = E.setRope(kv, { positions: [3, 4], context_positions: [0, 1, 2, 3, 4] });
  const cachedMore = E.addContextToken(E.addToken(cached, 2), 5);
  check(same(cachedMore.rope, { positions: [3, 4, 5], context_positions: [0, 1, 2, 3, 4, 5] }),
        `kv_cache: rope ${JSON.stringify(cachedMore.rope)}`);
  for (const [name, x] of [["llama counted", counted], ["llama spread", spread], ["kv_cache rope", cachedMore]]) {
    const r = run(x, ["--backward"]);
    if (check(r.status === 0, `${name}: run --backward exited ${r.status}: ${r.error}`)) checkMasked(x, r.trace, name);
  }
  const odd = E.setRope(load("cross_attention.json"), {});
  check(odd.rope.dims === 2, `cross_attention: rope on d_k = 3 got dims ${odd.rope.dims}`);
  const llamaDown = E.setDk(E.setRope(llama, { dims: 4 }), 3);
  check(llamaDown.rope.dims === 2, `llama_layer: setDk 3 left rope dims ${llamaDown.rope.dims}`);
});

// Each feature turned on and then off again gives back the input, key for key, where it had none.
section("on, then off", () => {
  for (const file of examples) {
    const x = load(file);
    const toggles = { scale: (y, v) => E.setScale(y, v && 0.5), rope: (y, v) => E.setRope(y, v && {}),
      alibi: (y, v) => E.setAlibi(y, v), softcap: (y, v) => E.setSoftcap(y, v && 3),
      sinks: (y, v) => E.setSinks(y, v), dropout: (y, v) => E.setDropout(y, v && { p: 0.5 }) };
    for (const [key, set] of Object.entries(toggles)) {
      if (x[key] !== undefined) continue;
      const on = set(x, true);
      check(on[key] !== undefined && same(set(on, null), x), `${file}: ${key} on and off did not give the input back`);
    }
  }
});

// A batch item's own cell, the labels of one item, and the default of "none".
section("batch items, labels and defaults", () => {
  const batch = load("padded_batch.json");
  const flipped = E.toggleMaskCell(E.setMask(batch, "causal"), 0, 2, 1);
  check(same(E.allowed(flipped)[0], E.allowed(E.setMask(batch, "causal"))) && E.allowed(flipped)[1][0][2] === true,
        "padded_batch: toggling item 1's cell touched item 0 or missed its own");
  const bert = load("bert_layer.json");
  const relabelled = E.renameToken(bert, 1, "x", 1);
  check(same(relabelled.tokens, [bert.tokens, ["my", "x", "is", "cute"]]),
        `bert_layer: renaming in item 1 gave ${JSON.stringify(relabelled.tokens)}`);
  check(!("mask" in E.setMask(cat, "none")), "the_cat_sat: setMask none added a mask key");
  check(same(Object.keys(E.setHeads(cat, 2)).slice(-1), ["n_heads"]), "the_cat_sat: n_heads not added at the end");
  check(!("n_kv_heads" in E.setHeads(cat, 2)), "the_cat_sat: n_kv_heads written while it is the default");
});

const seconds = ((Date.now() - started) / 1000).toFixed(1);
console.log(`${checks - failures} of ${checks} checks passed, ${failures} failed ` +
            `(${examples.length} examples, ${caseNumber} edits, ${runs} runs of the tool, ${seconds} s)`);
process.exit(failures ? 1 : 0);
