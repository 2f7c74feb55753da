/* attn-trace explorer (docs/explorer.md): the page's script. The attention core (the script before this
   one, AttnCore: the tool's library compiled to WebAssembly) computes the trace of the input and the
   report page of that trace, exactly as `attn-trace run --json -` and `attn-trace report` do; this
   script only holds the input, takes the learner's edits and shows what the core returns.

   The input comes from the address's #input= (base64url of the input JSON) when there is one, else from
   the block #input-data. Every valid edit, of a number in its cell or of the JSON text, runs the core
   again: #input-data and #trace-data then hold the new input and its trace, and the report frame shows
   its report. An input the core refuses leaves both as they were and shows the core's one-line error,
   the tool's own message. <html> counts the runs shown (data-runs) and the inputs refused
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

  var explore = null;  // the core's attn_explore(input, engine, dtype, block_q, block_k, backward): 0 done,
                       // 2 refused, 1 an internal error
  var resultOf = null; // the core's attn_result(part): 0 the trace, 1 the report, 3 the error line
  var shown = 0;       // runs shown
  var refused = 0;     // inputs refused
  var current = null;  // the text of the input whose trace is shown
  var edited = {};     // the cells changed since the page opened, by path

  // The matrices that get a cell per number, as paths into the input; a batch of X gets a table per item.
  var MATRICES = [['X'], ['context', 'X'], ['W_q'], ['W_k'], ['W_v'], ['W_o'], ['b_q'], ['b_k'], ['b_v'], ['b_o']];

  // -- the input's text -------------------------------------------------------------------------------

  // #input=BASE64URL (other settings may follow after '&'): the text it holds, or null when there is none.
  function inputFromLink() {
    var parts = location.hash.replace(/^#/, '').split('&');
    for (var i = 0; i < parts.length; i++) {
      if (parts[i].indexOf('input=') !== 0) continue;
      var b64 = parts[i].slice('input='.length).replace(/-/g, '+').replace(/_/g, '/').replace(/=+$/, '');
      while (b64.length % 4) b64 += '=';
      var binary = atob(b64);  // throws on what is not base64
      var bytes = new Uint8Array(binary.length);
      for (var j = 0; j < binary.length; j++) bytes[j] = binary.charCodeAt(j);
      return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    }
    return null;
  }

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

  function compute(text) {
    var start = performance.now();
    var status = explore(text, options.engine, options.dtype, options.block_q || 0, options.block_k || 0,
                         options.backward ? 1 : 0);
    if (status !== 0) return { error: resultOf(3) };
    return { trace: resultOf(0), report: resultOf(1), ms: performance.now() - start };
  }

  // The report frame as tall as its page, so that the page scrolls as one.
  function fitFrame() {
    var doc = frame.contentDocument;
    if (!doc || !doc.documentElement) return;
    frame.style.height = doc.documentElement.scrollHeight + 'px';
  }

  frame.addEventListener('load', function () {
    var doc = frame.contentDocument;
    if (!doc || !doc.documentElement) return;
    fitFrame();
    if (frame.contentWindow.ResizeObserver) new frame.contentWindow.ResizeObserver(fitFrame).observe(doc.body);
    root.setAttribute('data-runs', String(shown));
  });

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

  // Runs the core on `text`; shows its report, or its error. True when it was shown.
  function run(text) {
    var out = compute(text);
    if (out.error !== undefined) {
      showError(out.error);
      return false;
    }
    current = text;
    byId('input-data').textContent = text;
    byId('trace-data').textContent = out.trace;
    errorLine.hidden = true;
    textArea.classList.remove('invalid');
    shown += 1;
    statusLine.textContent = 'computed in this page in ' + Math.round(out.ms) + ' ms · ' + options.engine +
      ' · ' + options.dtype + (options.backward ? ' · with the backward pass' : '');
    frame.srcdoc = out.report;  // the load event counts it as shown
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
    cells.textContent = '';
    MATRICES.forEach(function (path) {
      var m = valueAt(value, path);
      if (m === undefined) return;
      var owner = path.length > 1 ? valueAt(value, path.slice(0, -1)) : value;
      var tokens = path[path.length - 1] === 'X' && owner ? owner.tokens : null;
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

  function commit(td, text) {
    var value;
    try {
      value = JSON.parse(current);
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
    textArea.value = next;
    edited[td.getAttribute('data-path')] = true;
    if (run(next)) drawCells(value);
    else td.textContent = typeof v === 'string' ? JSON.stringify(v) : String(v);
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
      if (again && keep !== null) again.focus();
    };
    field.addEventListener('keydown', function (e) {
      if (e.key === 'Enter') { e.preventDefault(); finish(true); }
      else if (e.key === 'Escape') { e.preventDefault(); finish(false); }
    });
    field.addEventListener('blur', function () { finish(true); });
  }

  cells.addEventListener('click', function (e) {
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
      var text = textArea.value;
      if (text === current || !explore) return;
      if (run(text)) {
        edited = {};
        drawCellsOf(text);
      }
    }, 250);
  });

  // -- start --------------------------------------------------------------------------------------------

  var embedded = byId('input-data').textContent;
  var text = embedded;
  var linkError = null;
  try {
    var linked = inputFromLink();
    if (linked !== null) text = linked;
  } catch (e) {
    linkError = 'the address\'s #input= is not base64url of UTF-8 text: the page opened with its own input';
  }
  textArea.value = text;
  drawCellsOf(text);

  // A link pasted into the same tab changes only the fragment: its input replaces the page's.
  window.addEventListener('hashchange', function () {
    var linked;
    try {
      linked = inputFromLink();
    } catch (e) {
      showError('the address\'s #input= is not base64url of UTF-8 text');
      return;
    }
    if (linked === null || linked === current || !explore) return;
    textArea.value = linked;
    if (run(linked)) {
      edited = {};
      drawCellsOf(linked);
    }
  });

  /* global AttnCore */
  AttnCore().then(function (core) {
    explore = core.cwrap('attn_explore', 'number', ['string', 'string', 'string', 'number', 'number', 'number']);
    resultOf = function (part) { return core.UTF8ToString(core.ccall('attn_result', 'number', ['number'], [part])); };
    if (!run(text) && text !== embedded) {
      // A link's input the core refuses: its error stays, and the page's own input is shown beneath it.
      var error = errorLine.textContent;
      run(embedded);
      sayError(error);
    }
    if (linkError) showError(linkError);
  }, function (e) {
    statusLine.textContent = 'the attention core could not start: ' + e;
  });
})();
