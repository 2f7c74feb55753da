  /* attn-trace report --backward: the flash backward's tile walk. Not a script of its own: report.cpp
     (page_script) puts it inside report.js's closure, before the line that ends it, so that it draws
     with report.js's helpers (heatmap, legend, nums, show, esc, cut, matrixOf, panelAt, schedule) once
     report.js has laid out the page. The gradients' heatmaps need nothing here: their sections are
     steps like the others, and report.js draws them. */

  // ---- the flash backward's tile walk ----

  var backwardWalk = null;
  if (data.backward && data.backward.flash && data.backward.flash.walk.length &&
      document.getElementById('backward-tile-state')) backwardWalk = backwardTileWalk(data.backward.flash);
  if (backwardWalk) {
    select.addEventListener('change', function () { if (chosen !== null) backwardWalk.toHead(chosen); });
  }

  function backwardTileWalk(fb) {
    var state = document.getElementById('backward-tile-state');
    var full = document.getElementById('backward-tile-full');
    var partsBox = document.getElementById('backward-tile-parts');
    var tileSelect = document.getElementById('backward-tile-select');
    var prev = document.querySelector('[data-action="prev-backward-tile"]');
    var next = document.querySelector('[data-action="next-backward-tile"]');

    // For each batch item and head: D first (the backward computes it before any tile), then every query
    // tile of every key tile, key tile by key tile, in the engine's order.
    var sequence = [], group = null;
    fb.walk.forEach(function (kt, ki) {
      var g = kt.batch + ':' + kt.head;
      if (g !== group) sequence.push({ k: ki, D: true });
      group = g;
      kt.tiles.forEach(function (t, q) { sequence.push({ k: ki, q: q }); });
    });
    fb.walk.forEach(function (kt, ki) {
      var option = document.createElement('option');
      option.value = String(ki);
      option.textContent = place(kt) + 'key tile ' + kt.j + ' (' + tokens(kt.batch, kt.cols, true) + ')';
      tileSelect.appendChild(option);
    });

    function place(kt) { return (config.batch !== null ? 'batch ' + kt.batch + ' · ' : '') + 'head ' + kt.head + ' · '; }
    function labels(batch, range, keys) { return (keys ? data.context_tokens : data.tokens)[batch].slice(range[0], range[1]); }
    function tokens(batch, range, keys) {
      var list = labels(batch, range, keys), text = list.slice(0, 4).join(', ');
      return list.length > 4 ? text + ', … (' + list.length + ')' : text;
    }
    function features(count) { var out = []; for (var c = 0; c < count; c++) out.push(String(c)); return out; }
    function sameGroup(a, b) { return a.batch === b.batch && a.head === b.head; }
    function dOf(kt) {
      for (var k = 0; k < fb.D.length; k++) if (fb.D[k].batch === kt.batch && fb.D[k].head === kt.head) return nums(fb.D[k].values);
      return null;
    }
    // The largest |x| of one part over the tiles of a batch item and head, so its colours hold still.
    var reaches = {};
    function reach(kt, part) {
      var key = kt.batch + ':' + kt.head + ':' + part;
      if (reaches[key] === undefined) {
        var most = 0;
        fb.walk.forEach(function (other) {
          if (!sameGroup(other, kt)) return;
          other.tiles.forEach(function (t) {
            if (!t.skipped) nums(t[part]).forEach(function (v) { if (isFinite(v)) most = Math.max(most, Math.abs(v)); });
          });
        });
        reaches[key] = most;
      }
      return reaches[key];
    }

    // The whole dS = ∂L/∂S″ of a batch item and head: the d_masked step when the page has it, else pieced
    // together from the tiles (cells of tiles not in the page stay blank, skipped tiles are the mask's).
    var matrices = {};
    function gradientMatrix(kt) {
      var key = kt.batch + ':' + kt.head;
      if (matrices[key]) return matrices[key];
      var panel = panelAt('d_masked', kt.batch, kt.head), m;
      if (panel) {
        m = matrixOf(stepByName.d_masked, panel);
        m.name = 'dS = ∂L/∂S″ (d_masked)';
        m.tip = null;
      } else {
        var values = new Float64Array(config.n * config.m).fill(NaN), removed = [], most = 0;
        for (var n = 0; n < values.length; n++) removed.push('0');
        fb.walk.forEach(function (w) {
          if (!sameGroup(w, kt)) return;
          w.tiles.forEach(function (t) {
            var dS = t.skipped ? null : nums(t.dS), width = w.cols[1] - w.cols[0];
            for (var r = t.rows[0]; r < t.rows[1]; r++) {
              for (var c = w.cols[0]; c < w.cols[1]; c++) {
                var at = r * config.m + c;
                if (!dS) { removed[at] = '1'; values[at] = 0; continue; }
                values[at] = dS[(r - t.rows[0]) * width + (c - w.cols[0])];
                if (isFinite(values[at])) most = Math.max(most, Math.abs(values[at]));
              }
            }
          });
        });
        m = { rows: config.n, cols: config.m, values: values, removed: removed.join(''), rowLabels: data.tokens[kt.batch],
              colLabels: data.context_tokens[kt.batch], scale: 'diverging', lo: -most, hi: most,
              name: 'dS = ∂L/∂S″ (from the tiles)', tip: null };
      }
      var drawn = heatmap(m);
      var box = document.createElement('div');
      box.className = 'matrix-box';
      box.appendChild(drawn.el);
      var highlight = document.createElement('div');
      highlight.className = 'tile-highlight';
      highlight.id = 'backward-tile-highlight';
      box.appendChild(highlight);
      var caption = document.createElement('div');
      caption.className = 'matrix-caption';
      caption.textContent = place(kt) + m.name + ': the frame is the current tile';
      var figure = document.createElement('figure');
      figure.className = 'heatmap walk-matrix';
      figure.appendChild(caption);
      figure.appendChild(box);
      figure.appendChild(legend(m.scale, m.lo, m.hi));
      matrices[key] = { m: m, drawn: drawn, box: box, figure: figure, highlight: highlight, done: [] };
      return matrices[key];
    }

    // One part of the tile as a heatmap; data-part names it as the trace does (P, dP, dS, dQ_add, …).
    function part(name, title, m) {
      var figure = document.createElement('figure');
      figure.className = 'heatmap';
      figure.setAttribute('data-part', name);
      var caption = document.createElement('figcaption');
      caption.textContent = title;
      figure.appendChild(caption);
      figure.appendChild(heatmap(m).el);
      figure.appendChild(legend(m.scale, m.lo, m.hi));
      return figure;
    }
    function signed(values, rows, cols, rowLabels, colLabels, name, most) {
      return { rows: rows, cols: cols, values: values, removed: null, rowLabels: rowLabels, colLabels: colLabels,
               scale: 'diverging', lo: -most, hi: most, name: name, tip: null };
    }
    // D of some rows, as a table whose cells carry the value as the data writes it.
    function dTable(caption, D, rowLabels, first) {
      var table = document.createElement('table');
      table.className = 'state';
      table.setAttribute('data-part', 'D');
      var html = '<caption>' + esc(caption) + '</caption><thead><tr><th></th><th>D</th></tr></thead><tbody>';
      for (var r = 0; r < rowLabels.length && r < 48; r++)
        html += '<tr><th>' + esc(cut(rowLabels[r], 12)) + '</th><td data-value="' + raw(D[first + r]) + '">' +
                show(D[first + r]) + '</td></tr>';
      if (rowLabels.length > 48) html += '<tr><th>⋮</th><td>' + (rowLabels.length - 48) + ' more rows</td></tr>';
      table.innerHTML = html + '</tbody>';
      return table;
    }
    // dQ_i so far: the contributions of this query tile from the key tiles walked up to this one.
    function dqSoFar(at) {
      var kt = fb.walk[at.k], t = kt.tiles[at.q], sum = new Float64Array((t.rows[1] - t.rows[0]) * fb.d_k);
      for (var k = 0; k <= at.k; k++) {
        if (!sameGroup(fb.walk[k], kt)) continue;
        fb.walk[k].tiles.forEach(function (u) {
          if (u.i !== t.i || u.skipped) return;
          nums(u.dQ_add).forEach(function (v, n) { sum[n] += v; });
        });
      }
      return sum;
    }
    function frame(el, b, pad) {
      el.style.left = b.left - pad + 'px'; el.style.top = b.top - pad + 'px';
      el.style.width = b.width + 2 * pad + 'px'; el.style.height = b.height + 2 * pad + 'px';
    }

    var current = 0;
    function render() {
      var at = sequence[current], kt = fb.walk[at.k], matrix = gradientMatrix(kt);
      if (full.firstChild !== matrix.figure) {
        full.innerHTML = '';
        full.appendChild(matrix.figure);
      }
      // Outline the tiles of this batch item and head already walked; frame the current one.
      matrix.done.forEach(function (d) { d.remove(); });
      matrix.done = [];
      for (var s = current - 1; s >= 0 && !sequence[s].D; s--) {
        var doneTile = fb.walk[sequence[s].k].tiles[sequence[s].q], doneCols = fb.walk[sequence[s].k].cols;
        var done = document.createElement('div');
        done.className = 'tile-done';
        frame(done, matrix.drawn.box(doneTile.rows[0], doneTile.rows[1], doneCols[0], doneCols[1]), 0);
        matrix.box.appendChild(done);
        matrix.done.push(done);
      }
      var h = matrix.highlight, D = dOf(kt);
      var header = 'step ' + (current + 1) + ' of ' + sequence.length + ' · ' + place(kt);
      partsBox.innerHTML = '';
      var maps = document.createElement('div');
      maps.className = 'tile-maps';
      var text;
      if (at.D) {
        h.style.display = 'none';
        h.setAttribute('data-rows', '');
        h.setAttribute('data-cols', '');
        text = header + 'D = rowsum(dO ⊙ O), before any tile\nOne number per query row, from the output O and its ' +
               'gradient dO alone. It equals rowsum(dA ⊙ A), the weighted mean of the row\'s dA, which the softmax\'s ' +
               'backward subtracts: dS = P ⊙ (dP − D_i).';
        if (D) partsBox.appendChild(dTable('D = rowsum(dO ⊙ O), every row', D, data.tokens[kt.batch], 0));
      } else {
        var t = kt.tiles[at.q], rows = t.rows, cols = kt.cols;
        var rowLabels = labels(kt.batch, rows, false), colLabels = labels(kt.batch, cols, true);
        h.style.display = '';
        frame(h, matrix.drawn.box(rows[0], rows[1], cols[0], cols[1]), 2);
        h.setAttribute('data-rows', rows.join(','));
        h.setAttribute('data-cols', cols.join(','));
        text = header + 'key tile ' + kt.j + ' (' + tokens(kt.batch, cols, true) + ') × query tile ' + t.i + ' (' +
               tokens(kt.batch, rows, false) + ')';
        var last = at.q === kt.tiles.length - 1;
        if (t.skipped) {
          text += '\nskipped: the mask rules out every query-key pair of this tile, so P = 0 and it adds nothing to ' +
                  'dQ_i, dK_j or dV_j.';
          var skipped = document.createElement('p');
          skipped.className = 'note';
          skipped.textContent = 'Nothing is computed for this tile.';
          partsBox.appendChild(skipped);
        } else {
          var P = nums(t.P), dP = nums(t.dP), dS = nums(t.dS), width = cols[1] - cols[0], zero = true;
          dS.forEach(function (v) { if (v !== 0) zero = false; });
          text += '\n' + (zero ? 'dS = 0 in every entry: each row\'s dP equals its D_i, so this tile moves no score ' +
                                 'and adds nothing to dQ_i or dK_j; dV_j still grows by Pᵀ·dO_i.'
                               : 'P is made again from the forward\'s lse; dS = P ⊙ (dP − D_i) sends each score its ' +
                                 'share of the gradient, into dQ_i (through K_j) and dK_j (through Q_i).') +
                  (last ? ' This is key tile ' + kt.j + '\'s last query tile: its dK_j and dV_j are done.' : '');
          if (D) partsBox.appendChild(dTable('D_i of these rows', D, rowLabels, rows[0]));
          partsBox.appendChild(maps);
          maps.appendChild(part('P', 'P = exp(S − lse): the weights made again', {
            rows: rowLabels.length, cols: width, values: P, removed: null, rowLabels: rowLabels, colLabels: colLabels,
            scale: 'sequential', lo: 0, hi: 1, name: 'P', tip: null }));
          maps.appendChild(part('dP', 'dP = dO_i·V_jᵀ', signed(dP, rowLabels.length, width, rowLabels, colLabels, 'dP',
                                                             reach(kt, 'dP'))));
          maps.appendChild(part('dS', 'dS = P ⊙ (dP − D_i)', {
            rows: rowLabels.length, cols: width, values: dS, removed: null, rowLabels: rowLabels, colLabels: colLabels,
            scale: 'diverging', lo: matrix.m.lo, hi: matrix.m.hi, name: 'dS',
            tip: function (r, c) {
              var k = r * width + c;
              return ['from P = ' + show(P[k]) + ', dP = ' + show(dP[k]) + ', D_i = ' + (D ? show(D[rows[0] + r]) : '?')];
            } }));
          var dq = reach(kt, 'dQ_add'), dqSum = dqSoFar(at), dqMost = dq;
          dqSum.forEach(function (v) { if (isFinite(v)) dqMost = Math.max(dqMost, Math.abs(v)); });
          maps.appendChild(part('dQ_add', 'dQ_i += scale·dS·K_j: this tile\'s part',
                                signed(nums(t.dQ_add), rowLabels.length, fb.d_k, rowLabels, features(fb.d_k), 'dQ_i part', dq)));
          maps.appendChild(part('dQ_sum', 'dQ_i so far: the key tiles up to this one',
                                signed(dqSum, rowLabels.length, fb.d_k, rowLabels, features(fb.d_k), 'dQ_i', dqMost)));
          maps.appendChild(part('dK_j', 'dK_j += scale·dSᵀ·Q_i (running)',
                                signed(nums(t.dK_j), colLabels.length, fb.d_k, colLabels, features(fb.d_k), 'dK_j',
                                       reach(kt, 'dK_j'))));
          maps.appendChild(part('dV_j', 'dV_j += Pᵀ·dO_i (running)',
                                signed(nums(t.dV_j), colLabels.length, fb.d_v, colLabels, features(fb.d_v), 'dV_j',
                                       reach(kt, 'dV_j'))));
        }
      }
      h.setAttribute('data-step', String(current));
      state.textContent = text;
      tileSelect.value = String(at.k);
      prev.disabled = current === 0;
      next.disabled = current === sequence.length - 1;
    }

    function go(to) {
      current = Math.max(0, Math.min(sequence.length - 1, to));
      render();
    }
    prev.addEventListener('click', function () { go(current - 1); });
    next.addEventListener('click', function () { go(current + 1); });
    tileSelect.addEventListener('change', function () {
      var ki = Number(tileSelect.value);
      for (var k = 0; k < sequence.length; k++) if (sequence[k].k === ki && !sequence[k].D) return go(k);
    });
    document.getElementById('flash-backward').addEventListener('keydown', function (event) {
      if (event.target.tagName === 'SELECT') return;
      if (event.key === 'ArrowRight') { go(current + 1); event.preventDefault(); }
      if (event.key === 'ArrowLeft') { go(current - 1); event.preventDefault(); }
    });
    schedule(render);
    return {
      // Follow the head selector: the D of that head, when the walk holds it.
      toHead: function (head) {
        if (fb.walk[sequence[current].k].head === head) return;
        for (var k = 0; k < sequence.length; k++) if (fb.walk[sequence[k].k].head === head) return go(k);
      }
    };
  }

