/* attn-trace report: draws the page from its data (the JSON in #trace-data, docs/report.md). Plain
   JavaScript, no framework, nothing fetched. The page reads without it; this adds the heatmaps (with
   the value under the pointer), the head selector, the flash tile walk and the theme switch. When the
   first screenful of drawing is done, <html> gets data-ready="1" (the tests and bench/ wait for it). */
(function () {
  'use strict';

  var root = document.documentElement;
  root.classList.add('js');
  var data = JSON.parse(document.getElementById('trace-data').textContent);
  var config = data.config;

  // Matrices up to this size per head are SVG rects that carry data-value; larger ones a canvas.
  var SVG_MAX = 64;

  // ---- numbers ----

  // A value of the data: a number, or "-inf", "inf", "nan" (JSON has no infinities).
  function num(x) {
    if (typeof x === 'number') return x;
    if (x === '-inf') return -Infinity;
    if (x === 'inf') return Infinity;
    return NaN;
  }
  function nums(list) {
    var out = new Float64Array(list.length);
    for (var k = 0; k < list.length; k++) out[k] = num(list[k]);
    return out;
  }
  // The value as the data writes it (data-value), so a test can compare it with the trace.
  function raw(x) {
    if (x === -Infinity) return '-inf';
    if (x === Infinity) return 'inf';
    if (x !== x) return 'nan';
    return String(x);
  }
  // The value for people: 4 digits after the point, like the terminal; tiny and huge ones in 3 digits.
  function show(x) {
    if (x === -Infinity) return '-inf';
    if (x === Infinity) return 'inf';
    if (x !== x) return 'nan';
    var a = Math.abs(x);
    if (a !== 0 && (a >= 1e6 || a < 1e-4)) return x.toExponential(2);
    return x.toFixed(4);
  }
  function esc(text) {
    return String(text).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
  }
  function cut(text, most) { return text.length > most ? text.slice(0, most - 1) + '…' : text; }

  // ---- colours (render/colormap.hpp's tables, carried in the data) ----

  function rgbOf(hex) { return [parseInt(hex.slice(1, 3), 16), parseInt(hex.slice(3, 5), 16), parseInt(hex.slice(5, 7), 16)]; }
  var lut = {
    sequential: { hex: data.colors.sequential, rgb: data.colors.sequential.map(rgbOf) },
    diverging: { hex: data.colors.diverging, rgb: data.colors.diverging.map(rgbOf) }
  };
  var removedHex = data.colors.removed, removedRgb = rgbOf(removedHex);

  // Where x falls in the colour range, as ColorRange::position does (weights: 'log' for the log scale).
  function position(scale, lo, hi, x, weights) {
    if (x !== x) return 0.5;
    if (x === Infinity) return 1;
    if (x === -Infinity) return 0;
    if (weights === 'log') {
      if (!(hi > lo) || !(lo > 0)) return x > 0 ? 1 : 0;
      if (!(x > lo)) return 0;
      return Math.min(1, Math.max(0, Math.log(x / lo) / Math.log(hi / lo)));
    }
    if (!(hi > lo)) return scale === 'diverging' ? 0.5 : 0;
    return Math.min(1, Math.max(0, (x / 2 - lo / 2) / (hi / 2 - lo / 2)));  // halved: no infinite span
  }
  // The slot of entry k of a heatmap's matrix m, under its weights' scale: the row scale divides by the
  // row's largest kept value (m.rowMax), as render/draw/panel.hpp's Shading does.
  function cellSlot(m, k) {
    var x = m.values[k];
    if (m.neutral > 0 && Math.abs(x) <= m.neutral) x = 0;  // within the rule: the colour of 0
    if (m.rowMax) {
      var top = m.rowMax[Math.floor(k / m.cols)];
      x = top > 0 ? x / top : 0;
    }
    return Math.round(position(m.scale, m.lo, m.hi, x, m.weights) * (lut[m.scale].hex.length - 1));
  }
  // The largest value each row kept, for the row scale.
  function rowMaxOf(m) {
    var out = [];
    for (var r = 0; r < m.rows; r++) {
      var top = 0;
      for (var c = 0; c < m.cols; c++) {
        var k = r * m.cols + c;
        if (!(m.removed && m.removed.charCodeAt(k) === 49) && m.values[k] > top) top = m.values[k];
      }
      out.push(top);
    }
    return out;
  }

  // ---- the tooltip ----

  var tooltip = document.getElementById('tooltip');
  function showTip(text, event) {
    tooltip.textContent = text;
    tooltip.hidden = false;
    var x = event.clientX + 14, y = event.clientY + 14;
    var w = tooltip.offsetWidth, h = tooltip.offsetHeight;
    if (x + w > window.innerWidth - 4) x = Math.max(4, event.clientX - w - 10);
    if (y + h > window.innerHeight - 4) y = Math.max(4, event.clientY - h - 10);
    tooltip.style.left = x + 'px';
    tooltip.style.top = y + 'px';
  }
  function hideTip() { tooltip.hidden = true; }

  // ---- one heatmap ----

  // m: {rows, cols, values (Float64Array, row-major), removed (string of 0/1, or null), rowLabels,
  //     colLabels, scale, lo, hi, tip(r, c) -> extra lines for the tooltip}
  // Returns {el, box(r0, r1, c0, c1) -> the pixel rectangle of those cells inside el}.
  function heatmap(m) {
    var big = Math.max(m.rows, m.cols);
    var svg = m.rows <= SVG_MAX && m.cols <= SVG_MAX;
    var px = svg ? Math.max(6, Math.min(40, Math.floor(440 / big))) : Math.max(0.5, Math.min(4, 512 / big));
    // A canvas keeps a narrow matrix (n × d_v) wide enough to see: its cells may be wider than tall.
    var pxWide = svg ? px : Math.max(px, Math.min(6, 128 / m.cols));
    var el, left = 0, top = 0;
    function removed(k) { return m.removed && m.removed.charCodeAt(k) === 49; }
    if (svg) {
      var every = Math.max(1, Math.ceil(13 / px));
      var longest = 1;
      for (var a = 0; a < m.rowLabels.length; a += every) longest = Math.max(longest, cut(m.rowLabels[a], 10).length);
      var colLongest = 1;
      for (var b = 0; b < m.colLabels.length; b += every) colLongest = Math.max(colLongest, cut(m.colLabels[b], 10).length);
      var turned = colLongest * 6.5 > px - 4;  // upright labels only where they fit their column
      left = Math.min(80, 7 * longest + 8);
      top = turned ? Math.min(74, 6.5 * colLongest + 8) : 18;
      var width = left + m.cols * px, height = top + m.rows * px;
      var parts = ['<svg xmlns="http://www.w3.org/2000/svg" class="hm" width="' + width + '" height="' + height + '" viewBox="0 0 ' +
                   width + ' ' + height + '" role="img">'];
      for (var r = 0; r < m.rows; r += every)
        parts.push('<text x="' + (left - 4) + '" y="' + (top + r * px + px / 2 + 4) + '" text-anchor="end">' +
                   esc(cut(m.rowLabels[r], 10)) + '</text>');
      for (var c = 0; c < m.cols; c += every) {
        var cx = left + c * px + px / 2;
        parts.push(turned ? '<text x="' + (cx + 4) + '" y="' + (top - 4) + '" transform="rotate(-90 ' + (cx + 4) + ' ' +
                            (top - 4) + ')">' + esc(cut(m.colLabels[c], 10)) + '</text>'
                          : '<text x="' + cx + '" y="' + (top - 5) + '" text-anchor="middle">' +
                            esc(cut(m.colLabels[c], 10)) + '</text>');
      }
      var hexes = lut[m.scale].hex;
      for (var i = 0, k = 0; i < m.rows; i++) {
        for (var j = 0; j < m.cols; j++, k++) {
          var v = m.values[k];
          var fill = removed(k) ? 'url(#removed-hatch)' : hexes[cellSlot(m, k)];
          parts.push('<rect class="cell" x="' + (left + j * px) + '" y="' + (top + i * px) + '" width="' + px +
                     '" height="' + px + '" fill="' + fill + '" data-value="' + raw(v) + '"/>');
        }
      }
      parts.push('</svg>');
      el = document.createElement('div');
      el.className = 'svg-box';
      el.style.position = 'relative';
      el.innerHTML = parts.join('');
    } else {
      var canvas = document.createElement('canvas');
      canvas.width = m.cols;
      canvas.height = m.rows;
      canvas.style.width = m.cols * pxWide + 'px';
      canvas.style.height = m.rows * px + 'px';
      canvas.setAttribute('role', 'img');
      canvas.setAttribute('aria-label', m.rows + ' × ' + m.cols + ' heatmap');
      var context = canvas.getContext('2d');
      var image = context.createImageData(m.cols, m.rows);
      var pixels = image.data, rgbs = lut[m.scale].rgb;
      for (var n = 0; n < m.rows * m.cols; n++) {
        var rgb = removed(n) ? removedRgb : rgbs[cellSlot(m, n)];
        pixels[4 * n] = rgb[0];
        pixels[4 * n + 1] = rgb[1];
        pixels[4 * n + 2] = rgb[2];
        pixels[4 * n + 3] = 255;
      }
      context.putImageData(image, 0, 0);
      el = document.createElement('div');
      el.className = 'canvas-box';
      el.appendChild(canvas);
      left = 1;  // the canvas's border
      top = 1;
    }
    el.addEventListener('mousemove', function (event) {
      var box = el.getBoundingClientRect();
      var scale = el.offsetWidth ? box.width / el.offsetWidth : 1;
      var c = Math.floor(((event.clientX - box.left) / scale - left) / pxWide);
      var r = Math.floor(((event.clientY - box.top) / scale - top) / px);
      if (r < 0 || c < 0 || r >= m.rows || c >= m.cols) return hideTip();
      var k = r * m.cols + c;
      var lines = [(m.rowLabels[r] || r) + ' → ' + (m.colLabels[c] || c) + '   (row ' + r + ', column ' + c + ')',
                   (m.name || 'value') + ' = ' + show(m.values[k]) + (removed(k) ? '   removed by the mask' : '')];
      if (m.tip) lines = lines.concat(m.tip(r, c));
      showTip(lines.join('\n'), event);
    });
    el.addEventListener('mouseleave', hideTip);
    return {
      el: el,
      box: function (r0, r1, c0, c1) {
        return { left: left + c0 * pxWide, top: top + r0 * px, width: (c1 - c0) * pxWide, height: (r1 - r0) * px };
      }
    };
  }

  // A small legend: the colour map from lo to hi (0 in the middle of a diverging one), as the steps'
  // legends that render/pages/report/legend.cpp writes.
  var legends = 0;
  function legend(scale, lo, hi) {
    var id = 'walk-legend-' + (legends++), hexes = lut[scale].hex, stops = '';
    for (var k = 0; k <= 10; k++)
      stops += '<stop offset="' + k / 10 + '" stop-color="' + hexes[Math.round(k / 10 * (hexes.length - 1))] + '"/>';
    var box = document.createElement('div');
    box.innerHTML = '<svg class="legend small" viewBox="0 0 150 26" width="150" height="26" role="img" aria-label="colour ' +
                    'scale from ' + show(lo) + ' to ' + show(hi) + '"><defs><linearGradient id="' + id + '">' + stops +
                    '</linearGradient></defs><rect x="1" y="1" width="130" height="9" fill="url(#' + id + ')" ' +
                    'class="legend-bar"/><text x="1" y="23">' + short(lo) + '</text><text x="131" y="23" ' +
                    'text-anchor="end">' + short(hi) + '</text>' + (scale === 'diverging' ? '<text x="66" y="23" ' +
                    'text-anchor="middle">0</text>' : '') + '</svg>';
    return box.firstChild;
  }
  function short(x) { return isFinite(x) ? String(Number(x.toPrecision(3))) : show(x); }

  // ---- drawing a little at a time, so a large page never freezes ----

  var queue = [], pumping = false, ready = false;
  function schedule(job) {
    queue.push(job);
    if (!pumping) {
      pumping = true;
      setTimeout(pump, 0);
    }
  }
  function pump() {
    var until = performance.now() + 40;
    while (queue.length && performance.now() < until) queue.shift()();
    if (queue.length) return setTimeout(pump, 0);
    pumping = false;
    if (!ready) {
      ready = true;
      root.setAttribute('data-ready', '1');
      root.setAttribute('data-render-ms', String(Math.round(performance.now())));
    }
  }
  function flush() { while (queue.length) queue.shift()(); }

  // ---- the steps ----

  var stepByName = {};
  data.steps.forEach(function (step) { stepByName[step.name] = step; });

  function panelAt(stepName, batch, head) {
    var step = stepByName[stepName];
    if (!step) return null;
    for (var k = 0; k < step.panels.length; k++) {
      var p = step.panels[k];
      if (p.batch === batch && p.head === head && p.values) return p;
    }
    return null;
  }
  function valuesOf(panel) {
    if (!panel.numbers) panel.numbers = nums(panel.values);
    return panel.numbers;
  }

  // The extra tooltip lines of a step: the weights say which score they came from.
  function tipFor(step, panel) {
    if (step.name !== 'weights') return null;
    var masked = panelAt('masked', panel.batch, panel.head) || panelAt('scaled', panel.batch, panel.head);
    var scores = panelAt('scores', panel.batch, panel.head);
    return function (r, c) {
      var k = r * panel.cols + c, lines = [];
      if (masked) lines.push('from the score S″ = ' + show(valuesOf(masked)[k]) + ' (scaled and masked: softmax\'s input)');
      if (scores) lines.push('raw score S = q·k = ' + show(valuesOf(scores)[k]));
      if (panel.empty_rows && panel.empty_rows.indexOf(r) >= 0) lines.push('this row has nothing to attend: all 0');
      return lines;
    };
  }

  // The query head chosen in the selector (null: all), and the key/value head it reads.
  var chosen = null;
  var group = Math.max(1, Math.round(config.n_heads / config.n_kv_heads));
  function showsPanel(panel) {
    if (chosen === null || panel.head === null) return true;
    if (config.head !== null) return true;  // a trace of one head holds nothing else
    return panel.head === (panel.kv ? Math.floor(chosen / group) : chosen);
  }

  var figures = [];  // {figure, panel, draw (once), drawn}
  function leftOut(panel) {
    var box = document.createElement('div');
    box.className = 'left-out';
    var size = panel.rows + ' × ' + panel.cols;
    box.textContent = panel.left_out === 'too large'
      ? 'not in this page: ' + size + ' is more than the ' + data.budget.step_numbers.toLocaleString('en') +
        ' numbers a page holds (attn-trace run --json saves them all)'
      : 'not in this page (' + size + '): its budget of numbers went to the heatmaps before it' +
        (panel.head !== null && config.head === null ? '; attn-trace report FILE --head ' + panel.head + ' shows it' : '');
    return box;
  }
  function addFigure(container, panel, caption, make) {
    var figure = document.createElement('figure');
    figure.className = 'heatmap';
    figure.setAttribute('data-batch', panel.batch);
    if (panel.head !== null) figure.setAttribute('data-head', panel.head);
    var label = document.createElement('figcaption');
    label.textContent = caption || '\u00a0';
    figure.appendChild(label);
    container.appendChild(figure);
    var entry = { figure: figure, panel: panel, drawn: false };
    entry.draw = function () {
      if (entry.drawn) return;
      entry.drawn = true;
      figure.appendChild(panel.values ? make().el : leftOut(panel));
      if (panel.values && (panel.rows > SVG_MAX || panel.cols > SVG_MAX)) {
        var axis = document.createElement('div');
        axis.className = 'axis-note';
        axis.textContent = panel.rows + ' × ' + panel.cols + ' (drawn on a canvas): point at a cell for its value';
        figure.appendChild(axis);
      }
    };
    figures.push(entry);
  }
  function matrixOf(step, panel) {
    var m = {
      rows: panel.rows, cols: panel.cols, values: valuesOf(panel), removed: panel.removed || null,
      rowLabels: panel.row_labels.map(function (label, r) {
        return panel.empty_rows && panel.empty_rows.indexOf(r) >= 0 ? label + ' ∅' : label;
      }),
      colLabels: panel.col_labels, scale: step.scale, lo: num(step.range[0]), hi: num(step.range[1]),
      weights: step.weights, name: step.name, tip: tipFor(step, panel)
    };
    if (step.weights === 'row') m.rowMax = rowMaxOf(m);
    return m;
  }

  // A step of a large batch has many heatmaps: the page draws the first ones and says how many it left.
  var MAX_FIGURES = 96;
  data.steps.forEach(function (step) {
    var section = document.getElementById('step-' + step.name);
    if (!section) return;
    var container = section.querySelector('.heatmaps');
    step.panels.slice(0, MAX_FIGURES).forEach(function (panel) {
      addFigure(container, panel, panel.caption, function () { return heatmap(matrixOf(step, panel)); });
    });
    if (step.panels.length > MAX_FIGURES) {
      var more = document.createElement('p');
      more.className = 'note';
      more.textContent = 'The page draws the first ' + MAX_FIGURES + ' of these ' + step.panels.length +
                         ' heatmaps; --head H or a smaller batch shows the others.';
      container.appendChild(more);
    }
  });

  if (data.diff) {
    var diffBox = document.getElementById('diff-maps');
    if (diffBox) {
      data.diff.panels.forEach(function (panel) {
        addFigure(diffBox, panel, panel.caption || 'flash − naive', function () {
          var m = matrixOf({ name: 'flash − naive (' + (data.diff.neutral > 0 ? 'tolerances' : 'ULPs') + ')',
                             scale: data.diff.scale, range: data.diff.range }, panel);
          m.neutral = num(data.diff.neutral);
          m.tip = null;
          return heatmap(m);
        });
      });
    }
  }

  // report --mistake: the first differing step as intended and as mistaken, on one colour scale.
  if (data.mistake && data.mistake.panels) {
    var mistakeBox = document.getElementById('mistake-maps');
    if (mistakeBox) {
      var mistakeStep = { name: data.mistake.first_difference, scale: data.mistake.scale, range: data.mistake.range };
      data.mistake.panels.forEach(function (panel) {
        addFigure(mistakeBox, panel, panel.caption, function () {
          var m = matrixOf(mistakeStep, panel);
          m.tip = null;
          return heatmap(m);
        });
      });
    }
  }

  function applyHeads() {
    figures.forEach(function (entry) {
      var visible = showsPanel(entry.panel);
      entry.figure.hidden = !visible;
      if (visible && !entry.drawn) schedule(entry.draw);
    });
  }

  // The head selector: every head, or one. Large traces start with one head, so the page opens quickly.
  var select = document.getElementById('head-select');
  (function () {
    var heads = config.head !== null ? [config.head] : [];
    if (config.head === null) for (var h = 0; h < config.n_heads; h++) heads.push(h);
    var all = document.createElement('option');
    all.value = 'all';
    all.textContent = heads.length > 1 ? 'all heads' : 'head ' + heads[0];
    select.appendChild(all);
    if (heads.length > 1) {
      heads.forEach(function (h) {
        var option = document.createElement('option');
        option.value = String(h);
        option.textContent = 'head ' + h;
        select.appendChild(option);
      });
    }
    var cells = 0;
    data.steps.forEach(function (step) {
      step.panels.forEach(function (p) { if (p.values) cells += p.rows * p.cols; });
    });
    if (heads.length > 1 && cells > 150000) {
      chosen = heads[0];
      select.value = String(chosen);
    }
    select.addEventListener('change', function () {
      chosen = select.value === 'all' ? null : Number(select.value);
      applyHeads();
      if (chosen !== null && walk) walk.toHead(chosen);
    });
  })();

  // With scripts, the heatmaps carry the numbers: fold the tables away (they stay one click off).
  Array.prototype.forEach.call(document.querySelectorAll('details.numbers'), function (d) { d.open = false; });

