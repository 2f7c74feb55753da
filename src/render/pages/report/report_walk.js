  // ---- the flash tile walk ----

  var walk = null;
  if (data.flash && data.flash.walk.length && document.getElementById('tile-state')) walk = tileWalk(data.flash);

  function tileWalk(flash) {
    var state = document.getElementById('tile-state');
    var full = document.getElementById('tile-full');
    var partsBox = document.getElementById('tile-parts');
    var tileSelect = document.getElementById('tile-select');
    var prev = document.querySelector('[data-action="prev-tile"]');
    var next = document.querySelector('[data-action="next-tile"]');
    var dv = flash.d_v;

    // Every key tile of every query tile, then the query tile's final division, in the engine's order.
    var sequence = [];
    flash.walk.forEach(function (q, qi) {
      q.tiles.forEach(function (t, k) { sequence.push({ q: qi, k: k }); });
      if (q.final) sequence.push({ q: qi, k: q.tiles.length, final: true });
    });
    flash.walk.forEach(function (q, qi) {
      var option = document.createElement('option');
      option.value = String(qi);
      option.textContent = place(q) + 'query tile ' + q.i + ' (' + tokens(q.batch, q.rows, false) + ')';
      tileSelect.appendChild(option);
    });

    function place(q) { return (config.batch !== null ? 'batch ' + q.batch + ' · ' : '') + 'head ' + q.head + ' · '; }
    function tokens(batch, range, keys) {
      var list = (keys ? data.context_tokens : data.tokens)[batch].slice(range[0], range[1]);
      var text = list.slice(0, 4).join(', ');
      return list.length > 4 ? text + ', … (' + list.length + ')' : text;
    }
    function labels(batch, range, keys) { return (keys ? data.context_tokens : data.tokens)[batch].slice(range[0], range[1]); }

    // The whole score matrix of a batch item and head: the masked step when the page has it, else
    // pieced together from the tiles (cells of tiles not in the page stay blank).
    var matrices = {};
    function scoreMatrix(q) {
      var key = q.batch + ':' + q.head;
      if (matrices[key]) return matrices[key];
      var step = stepByName.masked, panel = panelAt('masked', q.batch, q.head);
      var m;
      if (panel) {
        m = matrixOf(step, panel);
        m.name = 'S″ (scaled, masked)';
        m.tip = null;
      } else {
        var values = new Float64Array(config.n * config.m).fill(NaN), lo = 0, hi = 0;
        flash.walk.forEach(function (w) {
          if (w.batch !== q.batch || w.head !== q.head) return;
          w.tiles.forEach(function (t) {
            var S = t.skipped ? null : nums(t.S), width = t.cols[1] - t.cols[0];
            for (var r = w.rows[0]; r < w.rows[1]; r++) {
              for (var c = t.cols[0]; c < t.cols[1]; c++) {
                var v = S ? S[(r - w.rows[0]) * width + (c - t.cols[0])] : -Infinity;
                values[r * config.m + c] = v;
                if (isFinite(v)) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
              }
            }
          });
        });
        var removed = '';
        for (var k = 0; k < values.length; k++) removed += values[k] === -Infinity ? '1' : '0';
        var reach = Math.max(Math.abs(lo), Math.abs(hi));
        m = { rows: config.n, cols: config.m, values: values, removed: removed, rowLabels: data.tokens[q.batch],
              colLabels: data.context_tokens[q.batch], scale: 'diverging', lo: -reach, hi: reach,
              name: 'S (scaled, masked)', tip: null };
      }
      var drawn = heatmap(m);
      var box = document.createElement('div');
      box.className = 'matrix-box';
      box.appendChild(drawn.el);
      var caption = document.createElement('div');
      caption.className = 'matrix-caption';
      caption.textContent = place(q) + m.name + ': the frame is the current tile';
      var highlight = document.createElement('div');
      highlight.className = 'tile-highlight';
      highlight.id = 'tile-highlight';
      box.appendChild(highlight);
      var figure = document.createElement('figure');
      figure.className = 'heatmap walk-matrix';
      figure.appendChild(caption);
      figure.appendChild(box);
      figure.appendChild(legend(m.scale, m.lo, m.hi));
      matrices[key] = { m: m, drawn: drawn, box: box, figure: figure, highlight: highlight, done: [] };
      return matrices[key];
    }

    // O before this tile: the last O of this query tile so far, or zeros.
    function previousO(q, k) {
      for (var j = k - 1; j >= 0; j--) if (!q.tiles[j].skipped) return nums(q.tiles[j].O);
      return new Float64Array((q.rows[1] - q.rows[0]) * dv);
    }
    // The range of O over this query tile, so its colours hold still while walking.
    function oRange(q) {
      var reach = 0;
      q.tiles.forEach(function (t) {
        if (!t.skipped) nums(t.O).forEach(function (v) { if (isFinite(v)) reach = Math.max(reach, Math.abs(v)); });
      });
      return reach;
    }

    function figureOf(title, m) {
      var figure = document.createElement('figure');
      figure.className = 'heatmap';
      var caption = document.createElement('figcaption');
      caption.textContent = title;
      figure.appendChild(caption);
      figure.appendChild(heatmap(m).el);
      figure.appendChild(legend(m.scale, m.lo, m.hi));
      return figure;
    }

    function stateTable(q, t, rowLabels) {
      var table = document.createElement('table');
      table.className = 'state';
      // The columns are the state fields of the trace's tile table (flash.state); a field x_new is marked
      // where it differs from x_prev, and alpha where m rose.
      var names = flash.state, columns = {};
      var html = '<caption>the running state of each row</caption><thead><tr><th></th>';
      names.forEach(function (name) { html += '<th>' + esc(name) + '</th>'; columns[name] = nums(t[name]); });
      html += '</tr></thead><tbody>';
      var mp = columns.m_prev, mn = columns.m_new;
      for (var r = 0; r < rowLabels.length && r < 48; r++) {
        var rescaled = isFinite(mp[r]) && mn[r] > mp[r];
        html += '<tr' + (rescaled ? ' class="rescaled" title="m rose: what earlier tiles added is multiplied by alpha"' : '') +
                '><th>' + esc(cut(rowLabels[r], 12)) + '</th>';
        names.forEach(function (name) {
          var x = columns[name][r], before = /_new$/.test(name) ? columns[name.replace(/_new$/, '_prev')] : null;
          var changed = name === 'alpha' ? rescaled : before !== null && x !== before[r];
          html += '<td' + (changed ? ' class="changed"' : '') + '>' + show(x) + '</td>';
        });
        html += '</tr>';
      }
      if (rowLabels.length > 48) {
        html += '<tr><th>⋮</th><td colspan="' + names.length + '">' + (rowLabels.length - 48) + ' more rows</td></tr>';
      }
      table.innerHTML = html + '</tbody>';
      return table;
    }

    var current = 0;
    function render() {
      var at = sequence[current], q = flash.walk[at.q], matrix = scoreMatrix(q);
      if (full.firstChild !== matrix.figure) {
        full.innerHTML = '';
        full.appendChild(matrix.figure);
      }
      // Outline the tiles of this query tile already walked; frame the current one.
      matrix.done.forEach(function (d) { d.remove(); });
      matrix.done = [];
      var rows = q.rows, r0 = rows[0], r1 = rows[1], cols, text;
      for (var j = 0; j < Math.min(at.k, q.tiles.length); j++) {
        var b = matrix.drawn.box(r0, r1, q.tiles[j].cols[0], q.tiles[j].cols[1]);
        var done = document.createElement('div');
        done.className = 'tile-done';
        done.style.left = b.left + 'px'; done.style.top = b.top + 'px';
        done.style.width = b.width + 'px'; done.style.height = b.height + 'px';
        matrix.box.appendChild(done);
        matrix.done.push(done);
      }
      cols = at.final ? [0, config.m] : q.tiles[at.k].cols;
      var box = matrix.drawn.box(r0, r1, cols[0], cols[1]);
      var h = matrix.highlight;
      h.style.left = box.left - 2 + 'px'; h.style.top = box.top - 2 + 'px';
      h.style.width = box.width + 4 + 'px'; h.style.height = box.height + 4 + 'px';
      h.setAttribute('data-rows', rows.join(','));
      h.setAttribute('data-cols', cols.join(','));
      h.setAttribute('data-step', String(current));

      var rowLabels = labels(q.batch, rows, false);
      var header = 'tile ' + (current + 1) + ' of ' + sequence.length + ' · ' + place(q) + 'query tile ' + q.i +
                   ' (' + tokens(q.batch, rows, false) + ')';
      // The tile's state on top, its matrices in a row below it.
      partsBox.innerHTML = '';
      var maps = document.createElement('div');
      maps.className = 'tile-maps';
      if (at.final) {
        text = header + ' done: O / l, lse = m + log l\nEvery key tile has been seen: one division by l turns the ' +
               'running sums into the softmax-weighted average of the values.';
        var finalO = nums(q.final.O), lse = nums(q.final.lse);
        var reach = 0;
        finalO.forEach(function (v) { if (isFinite(v)) reach = Math.max(reach, Math.abs(v)); });
        maps.appendChild(figureOf('O / l: this query tile\'s rows of head_outputs', {
          rows: rowLabels.length, cols: dv, values: finalO, removed: null, rowLabels: rowLabels,
          colLabels: dvLabels(), scale: 'diverging', lo: -reach, hi: reach, name: 'O / l', tip: null }));
        var table = document.createElement('table');
        table.className = 'state';
        var html = '<caption>lse = m + log l</caption><tbody>';
        for (var r = 0; r < rowLabels.length && r < 48; r++)
          html += '<tr><th>' + esc(cut(rowLabels[r], 12)) + '</th><td>' + show(lse[r]) + '</td></tr>';
        table.innerHTML = html + '</tbody>';
        partsBox.appendChild(table);
        partsBox.appendChild(maps);
      } else {
        var t = q.tiles[at.k], colLabels = labels(q.batch, cols, true);
        text = header + ' × key tile ' + t.j + ' (' + tokens(q.batch, cols, true) + ')';
        if (t.skipped) {
          text += '\nskipped: the mask rules out every query-key pair of this tile, so m, l and O stay as they were.';
          var skipped = document.createElement('p');
          skipped.className = 'note';
          skipped.textContent = 'No scores are computed for this tile.';
          partsBox.appendChild(skipped);
        } else {
          var mp = nums(t.m_prev), mn = nums(t.m_new), rose = 0, first = 0;
          for (var i = 0; i < mp.length; i++) {
            if (mp[i] === -Infinity && mn[i] > -Infinity) first++;
            else if (mn[i] > mp[i]) rose++;
          }
          var said = [], kept = mp.length - rose - first;
          if (rose) said.push('m rose in ' + rose + ' row' + (rose > 1 ? 's' : '') + ': alpha = exp(m_prev − m_new) < 1 ' +
                              'rescales what earlier tiles added');
          if (first) said.push(first === mp.length ? 'every row meets its first key here: m_prev = -inf, so alpha = 0 ' +
                                                     '(nothing yet to rescale)'
                                                   : first + ' row' + (first > 1 ? 's meet their' : ' meets its') +
                                                     ' first key here (alpha = 0)');
          if (kept && kept < mp.length) said.push(kept + ' row' + (kept > 1 ? 's keep their' : ' keeps its') + ' maximum (alpha = 1)');
          else if (kept) said.push('no row\'s maximum rose: alpha = 1, the new terms are simply added');
          text += '\n' + said.join('; ') + '.';
          var S = nums(t.S), P = nums(t.P), removed = '';
          for (var n = 0; n < S.length; n++) removed += S[n] === -Infinity ? '1' : '0';
          var width = cols[1] - cols[0];
          maps.appendChild(figureOf('S: this tile of scaled scores', {
            rows: rowLabels.length, cols: width, values: S, removed: removed, rowLabels: rowLabels, colLabels: colLabels,
            scale: matrix.m.scale, lo: matrix.m.lo, hi: matrix.m.hi, name: 'S', tip: null }));
          partsBox.appendChild(stateTable(q, t, rowLabels));
          partsBox.appendChild(maps);
          maps.appendChild(figureOf('P = exp(S − m_new)', {
            rows: rowLabels.length, cols: width, values: P, removed: removed, rowLabels: rowLabels, colLabels: colLabels,
            scale: 'sequential', lo: 0, hi: 1, name: 'P',
            tip: function (r, c) { return ['from S = ' + show(S[r * width + c]) + ', m_new = ' + show(mn[r])]; } }));
          var reachO = oRange(q);
          maps.appendChild(figureOf('O_prev (before this tile)', {
            rows: rowLabels.length, cols: dv, values: previousO(q, at.k), removed: null, rowLabels: rowLabels,
            colLabels: dvLabels(), scale: 'diverging', lo: -reachO, hi: reachO, name: 'O_prev', tip: null }));
          maps.appendChild(figureOf('O = alpha·O_prev + P·V', {
            rows: rowLabels.length, cols: dv, values: nums(t.O), removed: null, rowLabels: rowLabels,
            colLabels: dvLabels(), scale: 'diverging', lo: -reachO, hi: reachO, name: 'O', tip: null }));
        }
      }
      state.textContent = text;
      tileSelect.value = String(at.q);
      prev.disabled = current === 0;
      next.disabled = current === sequence.length - 1;
    }
    function dvLabels() { var out = []; for (var c = 0; c < dv; c++) out.push(String(c)); return out; }

    function go(to) {
      current = Math.max(0, Math.min(sequence.length - 1, to));
      render();
    }
    prev.addEventListener('click', function () { go(current - 1); });
    next.addEventListener('click', function () { go(current + 1); });
    tileSelect.addEventListener('change', function () {
      var qi = Number(tileSelect.value);
      for (var k = 0; k < sequence.length; k++) if (sequence[k].q === qi) return go(k);
    });
    document.getElementById('flash').addEventListener('keydown', function (event) {
      if (event.target.tagName === 'SELECT') return;
      if (event.key === 'ArrowRight') { go(current + 1); event.preventDefault(); }
      if (event.key === 'ArrowLeft') { go(current - 1); event.preventDefault(); }
    });
    schedule(render);
    return {
      // Follow the head selector: the first query tile of that head, when the walk holds one.
      toHead: function (head) {
        if (flash.walk[sequence[current].q].head === head) return;
        for (var k = 0; k < sequence.length; k++) if (flash.walk[sequence[k].q].head === head) return go(k);
      }
    };
  }

  // ---- the theme ----

  var themeButton = document.querySelector('[data-action="theme"]');
  var darkQuery = window.matchMedia ? window.matchMedia('(prefers-color-scheme: dark)') : null;
  function isDark() {
    var chosenTheme = root.getAttribute('data-theme');
    return chosenTheme ? chosenTheme === 'dark' : !!(darkQuery && darkQuery.matches);
  }
  function labelTheme() { themeButton.textContent = isDark() ? 'light theme' : 'dark theme'; }
  themeButton.addEventListener('click', function () {
    root.setAttribute('data-theme', isDark() ? 'light' : 'dark');
    labelTheme();
  });
  if (darkQuery && darkQuery.addEventListener) darkQuery.addEventListener('change', labelTheme);
  labelTheme();

  // Print what is shown, drawn in full.
  window.addEventListener('beforeprint', flush);

  applyHeads();
  if (!queue.length) schedule(function () {});
})();
