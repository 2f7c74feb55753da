/* attn-trace explorer (docs/explorer.md): the overview, drawn at once after every edit. Every step of the
   trace as heatmaps, one per matrix (a step of shape (…, rows, cols) gets one per leading index), with
   compare's verdict and the tile walk in a line above them; pointing at a cell says its value and its
   tokens, and clicking a weight or a gradient asks for its explanation (`on.pick`), shown under its step
   until another is clicked. The numbers are read in place from the core's memory (the view's `offset`
   into one array of doubles), so nothing is copied or parsed but the steps' names and shapes. */
var AttnView = function (on) {  // eslint-disable-line no-unused-vars
  'use strict';

  var byId = function (id) { return document.getElementById(id); };
  var box = byId('steps');
  var verdictLine = byId('verdict');
  var probe = byId('probe');
  var explanation = byId('explanation');
  var explanationTitle = byId('explanation-title');
  var explanationText = byId('explanation-text');
  var MAX_PANELS = 16;  // per step: a step with more matrices says how many are left out
  var SIDE = 168;       // the largest side of a panel, in CSS pixels
  var cards = {};       // the cards drawn, by step name and shape: reused while the shapes stay
  var view = null;      // the view drawn last (the core's attn_result(2))
  var numbers = null;   // its numbers

  function number(x) {
    if (x === null || x === undefined) return 'n/a';
    if (x === 0) return '0';
    var a = Math.abs(x);
    return a >= 1e-3 && a < 1e5 ? String(Number(x.toPrecision(4))) : x.toExponential(2);
  }

  // The tokens that label an axis of `size` (the queries' or the keys'), of batch item b.
  function labels(list, b) {
    if (!Array.isArray(list)) return null;
    if (list.length > 0 && Array.isArray(list[0])) list = list[b] || list[0];
    return list;
  }

  function describe(step, index) {
    var rows = step.rows, cols = step.cols;
    var b = step.rank === 4 || (step.rank === 3 && view.batched) ? index[0] : 0;
    var queries = labels(view.tokens, b);
    var keys = labels(view.cross ? view.context_tokens : view.tokens, b);
    var r = step.rank >= 2 ? index[index.length - 2] : 0;
    var c = index[index.length - 1];
    var rowName = queries && rows === queries.length ? ' ' + JSON.stringify(queries[r]) : '';
    var colName = keys && cols === keys.length && step.name.indexOf('W_') < 0 ? ' ' + JSON.stringify(keys[c]) : '';
    return step.name + '[' + index.join(', ') + ']' + (step.rank >= 2 ? ' · row ' + r + rowName : '') + ' · column ' + c + colName;
  }

  // The colour of x on the step's scale: white at 0, blue for negatives, red for positives (only red
  // when every value is at least 0); grey for a masked -inf, black for NaN.
  function paint(data, k, x, scale, signed) {
    var r, g, b;
    if (x !== x) { r = 0; g = 0; b = 0; }
    else if (x === -Infinity) { r = 190; g = 190; b = 190; }
    else if (x === Infinity) { r = 120; g = 0; b = 0; }
    else {
      var t = scale > 0 ? Math.max(-1, Math.min(1, x / scale)) : 0;
      if (!signed) t = Math.max(0, t);
      if (t >= 0) { r = 255 - 55 * t; g = 255 - 200 * t; b = 255 - 215 * t; }
      else { t = -t; r = 255 - 215 * t; g = 255 - 140 * t; b = 255 - 25 * t; }
    }
    data[k] = r; data[k + 1] = g; data[k + 2] = b; data[k + 3] = 255;
  }

  function card(step) {
    var key = step.name + '|' + step.shape.join('x');
    var c = cards[key];
    if (c) return c;
    var el = document.createElement('section');
    el.className = 'step';
    el.setAttribute('data-step', step.name);
    var h = document.createElement('h3');
    h.textContent = step.name;
    var shape = document.createElement('span');
    shape.className = 'shape';
    shape.textContent = ' (' + step.shape.join(' × ') + ')';
    h.appendChild(shape);
    el.appendChild(h);
    var formula = document.createElement('p');
    formula.className = 'formula';
    el.appendChild(formula);
    var panels = document.createElement('div');
    panels.className = 'panels';
    el.appendChild(panels);
    var canvases = [];
    var cell = Math.max(2, Math.min(14, Math.floor(SIDE / Math.max(step.rows, step.cols))));
    for (var p = 0; p < Math.min(step.panels, MAX_PANELS); p++) {
      var figure = document.createElement('figure');
      var canvas = document.createElement('canvas');
      canvas.width = step.cols;
      canvas.height = step.rows;
      canvas.style.width = step.cols * cell + 'px';
      canvas.style.height = step.rows * cell + 'px';
      canvas.setAttribute('data-panel', String(p));
      figure.appendChild(canvas);
      if (step.panels > 1) {
        var caption = document.createElement('figcaption');
        caption.textContent = '[' + leading(step, p).join(', ') + ']';
        figure.appendChild(caption);
      }
      panels.appendChild(figure);
      canvases.push(canvas);
    }
    if (step.panels > MAX_PANELS) {
      var more = document.createElement('p');
      more.className = 'more';
      more.textContent = (step.panels - MAX_PANELS) + ' more matrices: the report below has them all';
      el.appendChild(more);
    }
    c = { el: el, canvases: canvases, formula: formula };
    cards[key] = c;
    return c;
  }

  // The leading index of panel p of a step: its position in the axes before the last two.
  function leading(step, p) {
    var out = [];
    for (var a = step.lead.length - 1; a >= 0; a--) {
      out.unshift(p % step.lead[a]);
      p = Math.floor(p / step.lead[a]);
    }
    return out;
  }

  function drawStep(step) {
    var c = card(step);
    c.formula.textContent = step.formula;
    var size = step.rows * step.cols;
    var scale = 0, signed = false;
    var end = step.offset + size * step.panels;
    for (var k = step.offset; k < end; k++) {
      var x = numbers[k];
      if (x === x && x !== Infinity && x !== -Infinity) {
        if (Math.abs(x) > scale) scale = Math.abs(x);
        if (x < 0) signed = true;
      }
    }
    for (var p = 0; p < c.canvases.length; p++) {
      var canvas = c.canvases[p];
      var context = canvas.getContext('2d');
      var image = context.createImageData(step.cols, step.rows);
      var base = step.offset + p * size;
      for (var i = 0; i < size; i++) paint(image.data, 4 * i, numbers[base + i], scale, signed);
      context.putImageData(image, 0, 0);
    }
    return c.el;
  }

  function verdict() {
    var parts = [];
    if (view.compare) {
      var c = view.compare;
      var failing = c.gradients.filter(function (g) { return !g.pass; }).length;
      parts.push('naive vs flash: ' + (c.pass ? 'PASS' : 'FAIL') + ' · max|flash − ref| = ' +
                 number(c.flash_vs_ref.max_abs) + (c.output_pass ? ' ≤ ' : ' > ') + number(c.bound) +
                 ' (reference in ' + c.reference + ')' +
                 (c.gradients.length ? ' · gradients: ' + (c.gradients.length - failing) + ' of ' +
                  c.gradients.length + ' within their bounds' : ''));
    }
    if (view.flash) {
      var f = view.flash;
      parts.push('flash tiles ' + f.block_q + ' × ' + f.block_k + ': ' + f.tiles + ' tiles, ' + f.rescaled +
                 ' rescaled a running max' + (f.skipped ? ', ' + f.skipped + ' skipped by the mask' : ''));
    }
    verdictLine.textContent = parts.join(' · ');
    verdictLine.className = 'verdict' + (view.compare && !view.compare.pass ? ' fail' : '');
  }

  // Draws `v` (the core's view) with `values` (its numbers, read in place): the cards of steps whose
  // names and shapes are unchanged are redrawn where they are.
  function draw(v, values) {
    view = v;
    numbers = values;
    var list = [];
    v.steps.forEach(function (s) {
      var rank = s.shape.length;
      s.rank = rank;
      s.cols = rank >= 1 ? s.shape[rank - 1] : 1;
      s.rows = rank >= 2 ? s.shape[rank - 2] : 1;
      s.lead = s.shape.slice(0, Math.max(0, rank - 2));
      s.panels = s.lead.reduce(function (a, b) { return a * b; }, 1);
      if (s.rows * s.cols * s.panels > 0) list.push(s);
    });
    v.batched = Array.isArray(v.tokens) && v.tokens.length > 0 && Array.isArray(v.tokens[0]);
    var kept = {};
    var previous = box.firstChild;
    list.forEach(function (s) {
      if (previous === explanation) previous = previous.nextSibling;
      var el = drawStep(s);
      kept[s.name + '|' + s.shape.join('x')] = true;
      if (el !== previous) box.insertBefore(el, previous);
      else previous = previous.nextSibling;
      el.stepInfo = s;
    });
    Object.keys(cards).forEach(function (key) {
      if (!kept[key]) {
        if (cards[key].el.parentNode) cards[key].el.parentNode.removeChild(cards[key].el);
        delete cards[key];
      }
    });
    if (!explanation.hidden) place(explanation.getAttribute('data-step'));
    verdict();
  }

  // The explanation right under the card of `step`.
  function place(step) {
    var owner = box.querySelector('section.step[data-step="' + step + '"]');
    if (!owner) {
      explanation.hidden = true;
      return;
    }
    if (owner.nextSibling !== explanation) box.insertBefore(explanation, owner.nextSibling);
  }

  // The step, the index and the value under a pointer event on a canvas, or null.
  function at(e) {
    var canvas = e.target;
    if (!canvas || canvas.tagName !== 'CANVAS') return null;
    var el = canvas.closest('section.step');
    if (!el || !el.stepInfo) return null;
    var s = el.stepInfo;
    var rect = canvas.getBoundingClientRect();
    var c = Math.floor((e.clientX - rect.left) / rect.width * s.cols);
    var r = Math.floor((e.clientY - rect.top) / rect.height * s.rows);
    if (r < 0 || c < 0 || r >= s.rows || c >= s.cols) return null;
    var p = Number(canvas.getAttribute('data-panel'));
    var index = leading(s, p).concat(s.rank >= 2 ? [r, c] : [c]);
    var value = numbers[s.offset + p * s.rows * s.cols + r * s.cols + c];
    return { step: s, index: index, value: value, el: el };
  }

  box.addEventListener('mousemove', function (e) {
    var hit = at(e);
    probe.textContent = hit ? describe(hit.step, hit.index) + ' = ' +
      (hit.value === -Infinity ? '-inf (masked)' : number(hit.value)) : '';
  });
  box.addEventListener('click', function (e) {
    var hit = at(e);
    if (hit) on.pick(hit.step.name, hit.index);
  });

  // The explanation of the number picked, under its step's card (text: what `explain` prints; null hides it).
  function explain(step, index, title, text, failed) {
    if (text === null) {
      explanation.hidden = true;
      return;
    }
    explanation.setAttribute('data-step', step);
    explanation.hidden = false;
    place(step);
    explanation.classList.toggle('failed', !!failed);
    explanationTitle.textContent = title;
    explanationText.textContent = text;
  }

  // Whether `index` is inside the shape `step` has in the view drawn last (false without that step).
  function holds(step, index) {
    var s = null;
    view.steps.forEach(function (x) { if (x.name === step) s = x; });
    return !!s && s.shape.length === index.length && index.every(function (k, a) { return k >= 0 && k < s.shape[a]; });
  }

  // Which explanation a click on a number of `step` asks for: 'weight', 'gradient' or 'none' (the core's view says).
  function explains(step) {
    var s = null;
    view.steps.forEach(function (x) { if (x.name === step) s = x; });
    return s ? s.explains : 'none';
  }

  return { draw: draw, explain: explain, holds: holds, explains: explains, describe: function (step, index) {
    var s = null;
    view.steps.forEach(function (x) { if (x.name === step) s = x; });
    return s ? describe(s, index) : step;
  } };
};
