/* attn-trace explorer (docs/explorer.md): the page's script. The attention core (the script before this
   one, AttnCore: the tool's library compiled to WebAssembly) computes the trace of the input and the
   report page of that trace, exactly as `attn-trace run --json -` and `attn-trace report` do; this
   script holds the input and the page's settings (dtype, engine, tiles, the backward pass), takes the
   learner's edits and shows what the core returns.

   The input comes from the address's #input= (explorer_link.js: base64url of the input JSON, the settings
   after it) when there is one, else from the block #input-data. Every valid edit, of a number in its cell,
   of the JSON text or of a setting, runs the core again: #input-data and #trace-data then hold the new
   input and its trace, the report frame shows its report, the address holds its link, and the history
   one more state to undo. An input the core refuses leaves everything as it was and shows the core's
   one-line error, the tool's own message. <html> counts the runs shown (data-runs) and the inputs refused
   (data-errors), for the tests. */
(function () {
  'use strict';

  var root = document.documentElement;
  var byId = function (id) { return document.getElementById(id); };
  var options = JSON.parse(byId('explorer-options').textContent);
  var textArea = byId('input-text');
  var cells = byId('cells');
  var errorLine = byId('error');
  var statusLine = byId('status');
  var frame = byId('report');

  var core = null;     // the attention core (AttnCore)
  var explore = null;  // the core's attn_explore(input, settings as JSON): 0 done,
                       // 2 refused, 1 an internal error
  var resultOf = null; // the core's attn_result(part): 0 the trace, 1 the report, 2 the view, 3 the error
                       // line, 4 the explanation
  var details = byId('full-report');
  var timingLine = byId('timing');
  var started = 0;     // performance.now() when the edit being shown began (0: none)
  var later = 0;       // the pending timer of the trace's text and the report
  var drawnMs = [];    // the last times from an edit to the page drawn
  var picked = null;   // the number whose explanation is shown: {step, index}
  var shown = 0;       // runs shown
  var refused = 0;     // inputs refused
  var current = null;  // the state whose trace is shown: {text, settings}
  var edited = {};     // the cells changed since the input was last replaced whole, by path
  var states = [];     // the states shown, oldest first: undo walks back, redo forward
  var at = -1;         // the index in `states` of the state shown

  // The page's settings as it was opened: the command line's, or the defaults of `attn-trace run`.
  var opening = {
    engine: options.engine || 'both',
    dtype: options.dtype || 'float32',
    block_q: options.block_q || 0,
    block_k: options.block_k || 0,
    backward: !!options.backward
  };

  // The matrices that get a cell per number, as paths into the input; a batch of X gets a table per item.
  var MATRICES = [['X'], ['context', 'X'], ['W_q'], ['W_k'], ['W_v'], ['W_o'], ['b_q'], ['b_k'], ['b_v'], ['b_o'],
                  ['dY']];

  // -- the input's text -------------------------------------------------------------------------------

  // JSON text with a matrix's rows one to a line, as people write an input by hand.
  function format(value, indent) {
    indent = indent || '';
    var inner = indent + '  ';
    if (Array.isArray(value)) {
      var flat = value.every(function (x) { return x === null || typeof x !== 'object'; });
      if (flat) return '[' + value.map(function (x) { return JSON.stringify(x); }).join(', ') + ']';
      return '[\n' + value.map(function (x) { return inner + format(x, inner); }).join(',\n') + '\n' + indent + ']';
    }
    if (value !== null && typeof value === 'object') {
      var keys = Object.keys(value);
      if (keys.length === 0) return '{}';
      return '{\n' + keys.map(function (k) { return inner + JSON.stringify(k) + ': ' + format(value[k], inner); })
        .join(',\n') + '\n' + indent + '}';
    }
    return JSON.stringify(value);
  }

  // -- the core ---------------------------------------------------------------------------------------

  function withSettings(settings, change) {
    var out = {};
    Object.keys(settings).forEach(function (k) { out[k] = settings[k]; });
    Object.keys(change || {}).forEach(function (k) { out[k] = change[k]; });
    return out;
  }

  // Whether two settings run the same: tiles count only where there are tiles.
  function sameSettings(a, b) {
    return AttnLink.write('', a) === AttnLink.write('', b);
  }

  // The core's run of one state: its view (the steps' names and shapes) and numbers (read in place from
  // the core's memory, valid until the next call), or its error line.
  function compute(state) {
    var o = state.settings;
    var tiles = o.engine !== 'naive';
    var start = performance.now();
    // the settings by the options' keywords (the core checks them as the command line does); a tile side
    // left out is the default
    var settings = { engine: o.engine, dtype: o.dtype, block_q: tiles && o.block_q ? o.block_q : null,
                     block_k: tiles && o.block_k ? o.block_k : null, backward: !!o.backward };
    var status = explore(state.text, JSON.stringify(settings));
    if (status !== 0) return { error: resultOf(3) };
    var view = JSON.parse(resultOf(2));
    var count = core.ccall('attn_value_count', 'number', [], []);
    var at_ = core.ccall('attn_values', 'number', [], []);
    var values = new Float64Array(core.HEAPF64.buffer, at_, count);
    return { view: view, values: values, ms: performance.now() - start };
  }

  // The report frame as tall as its page, so that the page scrolls as one.
  function fitFrame() {
    var doc = frame.contentDocument;
    if (!doc || !doc.documentElement) return;
    frame.style.height = doc.documentElement.scrollHeight + 'px';
  }

  frame.addEventListener('load', function () {
    var doc = frame.contentDocument;
    if (!doc || !doc.documentElement || !frame.getAttribute('srcdoc')) return;
    fitFrame();
    if (frame.contentWindow.ResizeObserver) new frame.contentWindow.ResizeObserver(fitFrame).observe(doc.body);
    root.setAttribute('data-runs', String(shown));
  });

  // What is written after the page is drawn: the input's and the trace's text (#input-data, #trace-data)
  // and, while the full report is open, the report in its frame: all of the state shown, the core's last
  // run.
  var reportShown = -1;  // the run whose report the frame holds
  var textStale = false;  // the JSON text is behind the input shown (a cell's edit)
  function finish() {
    clearTimeout(later);
    later = 0;
    if (textStale && document.activeElement !== textArea) {
      textStale = false;
      if (textArea.value !== current.text) textArea.value = current.text;
    }
    var link = '#' + AttnLink.write(current.text, current.settings);
    if (location.hash !== link) window.history.replaceState(null, '', link);
    if (byId('trace-data').getAttribute('data-run') !== String(shown)) {
      byId('input-data').textContent = current.text;
      byId('trace-data').textContent = resultOf(0);
      byId('trace-data').setAttribute('data-run', String(shown));
    }
    if (details.open && reportShown !== shown) {
      reportShown = shown;
      frame.srcdoc = resultOf(1);  // the load event counts it as shown
    } else if (!details.open) {
      root.setAttribute('data-runs', String(shown));
    }
  }
  details.addEventListener('toggle', function () { if (details.open && current) finish(); });

  // The time from the edit to the page drawn: taken after the next frame is painted.
  function timed(since, coreMs) {
    requestAnimationFrame(function () {
      setTimeout(function () {
        var ms = performance.now() - since;
        drawnMs.push(ms);
        if (drawnMs.length > 20) drawnMs.shift();
        var sorted = drawnMs.slice().sort(function (a, b) { return a - b; });
        timingLine.textContent = 'drawn in ' + Math.round(ms) + ' ms (the core ' + Math.round(coreMs) +
          ' ms) · median of the last ' + sorted.length + ': ' + Math.round(sorted[sorted.length >> 1]) + ' ms';
        root.setAttribute('data-drawn-ms', ms.toFixed(1));
      }, 0);
    });
  }

  function sayError(message) {
    errorLine.textContent = message;
    errorLine.hidden = false;
    textArea.classList.add('invalid');
  }

  function showError(message) {
    sayError(message);
    refused += 1;
    root.setAttribute('data-errors', String(refused));
  }

  // Runs the core on `state`; shows its report, or its error. True when it was shown.
  function show(state) {
    var since = started || performance.now();
    var out = compute(state);
    if (out.error !== undefined) {
      started = 0;
      showError(out.error);
      return false;
    }
    started = 0;
    current = state;
    errorLine.hidden = true;
    textArea.classList.remove('invalid');
    shown += 1;
    var o = state.settings;
    statusLine.textContent = 'computed in this page in ' + Math.round(out.ms) + ' ms · ' + o.engine + ' · ' +
      o.dtype + (o.backward ? ' · with the backward pass' : '');
    view.draw(out.view, out.values);
    if (picked) explain(picked.step, picked.index);
    controls.show(o);
    timed(since, out.ms);
    clearTimeout(later);
    later = setTimeout(finish, 120);
    return true;
  }

  // -- the explanation of one number ------------------------------------------------------------------

  function explain(step, index) {
    if (!view.holds(step, index)) {  // an edit took the number away (a token removed, the backward pass off)
      picked = null;
      view.explain(step, index, '', null, false);
      return;
    }
    picked = { step: step, index: index };
    var what = view.describe(step, index);
    var status;
    // which explanation the step's numbers have is the core's to say (the step table's, in its view)
    var explains = view.explains(step);
    if (explains === 'weight') {
      var n = index.length;
      var b = n === 4 ? index[0] : 0;
      status = core.ccall('attn_explain', 'number', ['number', 'number', 'number', 'number'],
                          [b, index[n - 3], index[n - 2], index[n - 1]]);
      what = 'explain: the weight of query ' + index[n - 2] + ' on key ' + index[n - 1] + ', head ' + index[n - 3] +
        (n === 4 ? ', batch item ' + b : '') + ' (' + what + ')';
    } else if (explains === 'gradient') {
      var at_ = core._malloc(4 * Math.max(1, index.length));
      core.HEAPU32.set(index, at_ >> 2);
      status = core.ccall('attn_explain_grad', 'number', ['string', 'number', 'number'], [step, at_, index.length]);
      core._free(at_);
      what = 'explain --grad ' + step + ' --index ' + index.join(',') + ' (' + what + ')';
    } else {
      view.explain(step, index, what, 'Click a weight (scores, scaled, masked, weights …) for `explain`, or a ' +
                   'gradient (d_…) for `explain --grad`: the explanation follows every edit.', false);
      return;
    }
    if (status !== 0) view.explain(step, index, what, resultOf(3), true);
    else view.explain(step, index, what, resultOf(4), false);
  }

  // A new state from the current one: its text (or the current text) with the settings changed. Shown
  // and kept in the history when the core takes it; when it refuses, the error shows and nothing changes.
  // `gesture`: a drag's id; its later states replace its first in the history, so that one undo undoes
  // the whole drag.
  function change(text, settings, gesture) {
    var state = { text: text === null ? current.text : text, settings: withSettings(current.settings, settings),
                  gesture: gesture };
    if (state.text === current.text && sameSettings(state.settings, current.settings)) {
      controls.show(current.settings);
      return true;
    }
    if (!show(state)) {
      controls.show(current.settings);
      return false;
    }
    states.length = at + 1;
    if (gesture && at > 0 && states[at].gesture === gesture) states[at] = state;
    else states.push(state);
    at = states.length - 1;
    controls.history(at, states.length);
    return true;
  }

  // The state at `index` of the history, shown again: its text replaces the editor's whole.
  function travel(index) {
    if (index < 0 || index >= states.length || index === at) return;
    if (!show(states[index])) return;
    at = index;
    edited = {};
    textStale = false;
    textArea.value = states[index].text;
    drawCellsOf(states[index].text);
    controls.history(at, states.length);
  }

  // A whole new text (the editor's, a link's, an example, reset): shown, kept, and its cells drawn.
  function replace(text, settings) {
    if (!change(text, settings)) return false;
    edited = {};
    textStale = false;
    textArea.value = text;
    drawCellsOf(text);
    return true;
  }

  // -- the cells --------------------------------------------------------------------------------------

  function valueAt(value, path) {
    for (var i = 0; i < path.length; i++) {
      if (value === null || typeof value !== 'object' || !(path[i] in value)) return undefined;
      value = value[path[i]];
    }
    return value;
  }

  function isRow(x) { return Array.isArray(x) && x.every(function (v) { return !Array.isArray(v); }); }
  function isMatrix(x) { return Array.isArray(x) && x.length > 0 && x.every(isRow); }

  // One table: a row per token (or per row of a weight), a cell per number. A bias is one row (`oneRow`),
  // its cells at [.., j]; a matrix's at [.., i, j].
  function drawMatrix(title, path, matrix, rowLabels, oneRow) {
    var box = document.createElement('div');
    box.className = 'matrix';
    var heading = document.createElement('h3');
    heading.textContent = title;
    box.appendChild(heading);
    var scroll = document.createElement('div');
    scroll.className = 'scroll';
    var table = document.createElement('table');
    table.className = 'numbers';
    table.setAttribute('data-matrix', path.join('/'));
    matrix.forEach(function (row, i) {
      var tr = document.createElement('tr');
      var th = document.createElement('th');
      th.scope = 'row';
      th.textContent = rowLabels && typeof rowLabels[i] === 'string' ? rowLabels[i] : String(i);
      tr.appendChild(th);
      row.forEach(function (v, j) {
        var cellPath = path.concat(oneRow ? [j] : [i, j]);
        tr.appendChild(drawCell(cellPath, v));
      });
      table.appendChild(tr);
    });
    scroll.appendChild(table);
    box.appendChild(scroll);
    cells.appendChild(box);
  }

  function drawCell(path, v) {
    var td = document.createElement('td');
    var key = path.join('/');
    td.tabIndex = 0;
    td.setAttribute('data-path', key);
    td.textContent = typeof v === 'string' ? JSON.stringify(v) : String(v);
    td.title = path[0] + path.slice(1).map(function (p) { return typeof p === 'number' ? '[' + p + ']' : '.' + p; }).join('');
    if (edited[key]) td.classList.add('edited');
    return td;
  }

  // The cells of the input `text`; none when it is not JSON (the core then says why).
  function drawCellsOf(text) {
    var value;
    try {
      value = JSON.parse(text);
    } catch (e) {
      cells.textContent = '';
      return;
    }
    drawCells(value);
  }

  function drawCells(value) {
    structure.show(value);
    cells.textContent = '';
    MATRICES.forEach(function (path) {
      var m = valueAt(value, path);
      if (m === undefined) return;
      var owner = path.length > 1 ? valueAt(value, path.slice(0, -1)) : value;
      var last = path[path.length - 1];
      var tokens = (last === 'X' || last === 'dY') && owner ? owner.tokens : null;  // dY: a row per query
      var title = path.join('.');
      if (isRow(m)) drawMatrix(title, path, [m], null, true);
      else if (isMatrix(m)) drawMatrix(title, path, m, tokens, false);
      else if (Array.isArray(m) && m.every(isMatrix)) {
        m.forEach(function (item, b) {
          drawMatrix(title + '[' + b + ']', path.concat([b]), item, tokens && Array.isArray(tokens[b]) ? tokens[b] : null,
                     false);
        });
      }
    });
  }

  function setAt(value, path, v) {
    var owner = valueAt(value, path.slice(0, -1));
    owner[path[path.length - 1]] = v;
  }

  // What was typed as the input's value: a number when it reads as one, else the text itself, which the
  // core then refuses with the tool's message (naming the cell by its JSON Pointer).
  function typed(text) {
    var t = text.trim();
    var x = t === '' ? NaN : Number(t);
    return isFinite(x) ? x : t;
  }

  function commit(td, text, gesture) {
    started = performance.now();
    var value;
    try {
      value = JSON.parse(current.text);
    } catch (e) {
      return;  // the shown input is always JSON; nothing to edit otherwise
    }
    var path = td.getAttribute('data-path').split('/').map(function (p) { return /^\d+$/.test(p) ? Number(p) : p; });
    var v = typed(text);
    if (valueAt(value, path) === v) {
      td.textContent = String(v);
      return;
    }
    setAt(value, path, v);
    var next = format(value);
    textStale = true;  // the JSON text follows once the page is drawn (finish)
    edited[td.getAttribute('data-path')] = true;
    var ok = change(next, null, gesture);
    td.textContent = typeof v === 'string' ? JSON.stringify(v) : String(v);
    if (ok) td.classList.add('edited');
    else {
      textStale = false;
      textArea.value = next;  // the refused text, to read beside the error and mend
    }
  }

  function startEdit(td, initial) {
    if (td.querySelector('input')) return;
    var before = td.textContent;
    var field = document.createElement('input');
    field.type = 'text';
    field.inputMode = 'decimal';
    field.value = initial === undefined ? before : initial;
    field.setAttribute('aria-label', td.title);
    td.textContent = '';
    td.appendChild(field);
    field.focus();
    if (initial === undefined) field.select();
    var done = false;
    var finish = function (keep) {
      if (done) return;
      done = true;
      var text = field.value;
      td.textContent = before;
      if (keep && text !== before) commit(td, text);
      var again = cells.querySelector('td[data-path="' + td.getAttribute('data-path') + '"]');
      if (again && keep !== null) again.focus({ preventScroll: true });
    };
    field.addEventListener('keydown', function (e) {
      if (e.key === 'Enter') { e.preventDefault(); finish(true); }
      else if (e.key === 'Escape') { e.preventDefault(); finish(false); }
    });
    field.addEventListener('blur', function () { finish(true); });
  }

  // A drag sideways on a number nudges it, 0.01 for every 4 pixels (0.1 with Shift), recomputing as it
  // goes, at most once a frame; the drag is one step of the history.
  var drag = null;
  var drags = 0;
  cells.addEventListener('pointerdown', function (e) {
    var td = e.target.closest('td[data-path]');
    if (!td || e.button !== 0 || td.querySelector('input') || e.pointerType === 'touch') return;
    var v = Number(td.textContent);
    if (!isFinite(v)) return;
    drag = { td: td, x: e.clientX, from: v, moved: false, id: 'drag' + (++drags), frame: 0, to: v };
  });
  cells.addEventListener('pointermove', function (e) {
    if (!drag || !(e.buttons & 1)) return;
    var dx = e.clientX - drag.x;
    if (!drag.moved && Math.abs(dx) < 4) return;
    if (!drag.moved) {
      drag.moved = true;
      drag.td.setPointerCapture(e.pointerId);
      drag.td.classList.add('nudged');
    }
    var step = e.shiftKey ? 0.1 : 0.01;
    drag.to = Math.round((drag.from + Math.round(dx / 4) * step) * 1e6) / 1e6;
    if (drag.frame) return;
    var d = drag;
    d.frame = requestAnimationFrame(function () {
      d.frame = 0;
      if (Number(d.td.textContent) !== d.to) commit(d.td, String(d.to), d.id);
    });
  });
  function endDrag() {
    if (!drag) return;
    if (drag.moved) {
      drag.td.classList.remove('nudged');
      drag.ended = true;  // the click that follows a drag does not open the cell
    }
    else drag = null;
  }
  cells.addEventListener('pointerup', endDrag);
  cells.addEventListener('pointercancel', endDrag);
  cells.addEventListener('click', function (e) {
    if (drag && drag.ended) {
      drag = null;
      return;
    }
    drag = null;
    var td = e.target.closest('td[data-path]');
    if (td) startEdit(td);
  });
  cells.addEventListener('keydown', function (e) {
    var td = e.target.closest('td[data-path]');
    if (!td || e.target !== td) return;
    if (e.key === 'Enter' || e.key === 'F2') { e.preventDefault(); startEdit(td); }
    else if (e.key.length === 1 && /[-+0-9.eE]/.test(e.key) && !e.ctrlKey && !e.metaKey) {
      e.preventDefault();
      startEdit(td, e.key);
    }
  });

  // -- the text -------------------------------------------------------------------------------------

  var pending = 0;
  textArea.addEventListener('input', function () {
    clearTimeout(pending);
    pending = setTimeout(function () {
      started = performance.now();
      var text = textArea.value;
      if (!explore || text === current.text) return;
      if (change(text, null)) {
        edited = {};
        drawCellsOf(text);
      }
    }, 250);
  });

  // -- start --------------------------------------------------------------------------------------------

  // The structure's controls (explorer_structure.js) edit the input shown as a whole.
  var structure = AttnStructure({
    input: function () { return JSON.parse(current.text); },
    edit: function (value) { started = performance.now(); replace(format(value), null); },
    fail: function (message) { showError(message); }
  });

  var embedded = { text: byId('input-data').textContent, settings: opening };
  var first = embedded;
  var linkError = null;
  try {
    var linked = AttnLink.read(location.hash);
    if (linked.input !== null) first = { text: linked.input, settings: withSettings(opening, linked.settings) };
  } catch (e) {
    linkError = 'the address\'s #input= is not base64url of UTF-8 text: the page opened with its own input';
  }
  textArea.value = first.text;
  drawCellsOf(first.text);

  // A link pasted into the same tab changes only the fragment: its input and settings replace the page's.
  window.addEventListener('hashchange', function () {
    var linked;
    try {
      linked = AttnLink.read(location.hash);
    } catch (e) {
      showError('the address\'s #input= is not base64url of UTF-8 text');
      return;
    }
    if (linked.input === null || !explore) return;
    var settings = withSettings(opening, linked.settings);
    if (linked.input === current.text && sameSettings(settings, current.settings)) return;
    replace(linked.input, settings);
  });

  var controls = AttnControls({
    settings: function (change_) { started = performance.now(); return change(null, change_); },
    undo: function () { travel(at - 1); },
    redo: function () { travel(at + 1); },
    reset: function () { replace(embedded.text, embedded.settings); },
    example: function (text) { replace(text, null); },
    input: function () { return current.text; },
    trace: function () { finish(); return byId('trace-data').textContent; },
    link: function () { return location.href.split('#')[0] + '#' + AttnLink.write(current.text, current.settings); }
  });

  // The first state: a link's input the core refuses keeps its error, and the page's own input shows.
  function start() {
    current = first;
    if (show(first)) {
      states = [first];
    } else {
      var error = errorLine.textContent;
      current = embedded;
      textArea.value = embedded.text;
      drawCellsOf(embedded.text);
      show(embedded);
      states = [embedded];
      if (first !== embedded) sayError(error);
    }
    at = 0;
    controls.history(at, states.length);
    if (linkError) showError(linkError);
  }

  var view = AttnView({ pick: function (step, index) { explain(step, index); } });

  /* global AttnCore, AttnLink, AttnControls, AttnStructure, AttnView */
  AttnCore().then(function (core_) {
    core = core_;
    explore = core.cwrap('attn_explore', 'number', ['string', 'string']);
    resultOf = function (part) { return core.UTF8ToString(core.ccall('attn_result', 'number', ['number'], [part])); };
    var list = JSON.parse(core.UTF8ToString(core.ccall('attn_examples', 'number', [], [])));
    controls.examples(list);
    structure.offer(JSON.parse(core.UTF8ToString(core.ccall('attn_features', 'number', [], []))));
    start();
  }, function (e) {
    statusLine.textContent = 'the attention core could not start: ' + e;
  });
})();
