/* attn-trace explorer (docs/explorer.md): the mask's decisions and its structural edits, for explorer_edits.js.
   Pure functions of a mask value as the input holds it (undefined, "none", "causal" or a mask object,
   docs/input-format.md "Masks") and the input's sizes {n, m, batch} (batch 0 for a single sequence). Nothing
   here changes its argument: every function returns a new value. Errors are thrown as one-line Errors. */
var AttnMask = (function () {
  'use strict';

  var KINDS = ['none', 'causal', 'sliding_window', 'padding', 'custom'];
  var ALIGNS = ['top_left', 'bottom_right'];

  function copy(value) {
    return value === undefined ? undefined : JSON.parse(JSON.stringify(value));
  }

  function fail(message) {
    throw new Error(message);
  }

  function isWhole(x) {
    return typeof x === 'number' && isFinite(x) && Math.floor(x) === x;
  }

  function kindOf(mask) {
    if (mask === undefined || mask === null) return 'none';
    return typeof mask === 'string' ? mask : mask.type;
  }

  function alignOf(mask) {
    return mask !== null && typeof mask === 'object' && mask.align !== undefined ? mask.align : undefined;
  }

  // Whether the mask holds one list of flags (padding) or one matrix (custom) per batch item, rather than
  // one that every item shares: the loader's test, the first entry being a list one level deeper.
  function perItem(mask, batch) {
    if (!batch || mask === null || typeof mask !== 'object') return false;
    if (mask.type === 'padding') return Array.isArray(mask.keep) && Array.isArray(mask.keep[0]);
    if (mask.type === 'custom') {
      var a = mask.allow;
      return Array.isArray(a) && Array.isArray(a[0]) && Array.isArray(a[0][0]);
    }
    return false;
  }

  // The n × m decisions of a rule, item `b`'s for a per-item mask: true where query i may see key j. These
  // are the formulas of docs/input-format.md: the offset o is 0 for top_left and m - n for bottom_right;
  // causal allows j <= i + o, a window of w allows i + o - w < j <= i + o, padding allows the keys whose
  // flag is 1.
  function decisions(mask, n, m, b) {
    var kind = kindOf(mask);
    var offset = alignOf(mask) === 'bottom_right' ? m - n : 0;
    var keep = kind === 'padding' ? (Array.isArray(mask.keep[0]) ? mask.keep[b] : mask.keep) : null;
    var allow = kind === 'custom' ? (Array.isArray(mask.allow[0][0]) ? mask.allow[b] : mask.allow) : null;
    var out = [];
    for (var i = 0; i < n; i++) {
      var row = [];
      for (var j = 0; j < m; j++) {
        var yes = true;
        if (kind === 'causal') yes = j <= i + offset;
        else if (kind === 'sliding_window') yes = j <= i + offset && j > i + offset - mask.window;
        else if (kind === 'padding') yes = keep[j] === 1;
        else if (kind === 'custom') yes = allow[i][j] === true;
        row.push(yes);
      }
      out.push(row);
    }
    return out;
  }

  // What the mask allows: an n × m matrix of booleans, or a list of them (one per batch item) when the mask
  // holds one list or matrix per item.
  function allowed(mask, sizes) {
    if (!perItem(mask, sizes.batch)) return decisions(mask, sizes.n, sizes.m, 0);
    var out = [];
    for (var b = 0; b < sizes.batch; b++) out.push(decisions(mask, sizes.n, sizes.m, b));
    return out;
  }

  // -- a custom matrix that grows or shrinks with its tokens ------------------------------------------------

  // The index in the old matrix of index k of the new one, when a new place was inserted at `at` (-1: none
  // inserted); -1 for the new place itself.
  function oldIndex(k, at) {
    if (at < 0 || k < at) return k;
    return k === at ? -1 : k - 1;
  }

  // A copy of the boolean matrix `a` with a new row at `row` and a new column at `col` (-1: none). The old
  // cells keep their places. A new cell copies the nearest old cell on its own diagonal ((i + t, j + t),
  // then (i - t, j - t), for t = 1, 2, …), so that a mask that depends only on i - j (none, causal, a
  // sliding window, in self-attention) stays that mask: the new token is treated as its neighbours are.
  // Where its diagonal holds no old cell (a corner), it copies the old cell of the nearest old row and column.
  function grow(a, row, col) {
    var rows = a.length + (row >= 0 ? 1 : 0);
    var cols = a[0].length + (col >= 0 ? 1 : 0);
    var old = function (i, j) {
      var p = oldIndex(i, row);
      var q = oldIndex(j, col);
      return p < 0 || q < 0 ? null : a[p][q];
    };
    var nearest = function (k, at, size) {
      if (k !== at) return k;
      return at + 1 < size ? at + 1 : at - 1;
    };
    var fill = function (i, j) {
      for (var t = 1; t < rows + cols; t++) {
        if (i + t < rows && j + t < cols && old(i + t, j + t) !== null) return old(i + t, j + t);
        if (i - t >= 0 && j - t >= 0 && old(i - t, j - t) !== null) return old(i - t, j - t);
      }
      return old(nearest(i, row, rows), nearest(j, col, cols));
    };
    var out = [];
    for (var i = 0; i < rows; i++) {
      var line = [];
      for (var j = 0; j < cols; j++) {
        var v = old(i, j);
        line.push(v === null ? fill(i, j) : v);
      }
      out.push(line);
    }
    return out;
  }

  // A copy of matrix `a` without row `row` and column `col` (-1: keep them all).
  function shrink(a, row, col) {
    return a.filter(function (r, i) { return i !== row; })
      .map(function (r) { return r.filter(function (v, j) { return j !== col; }); });
  }

  // The mask after a token is inserted: a new query at `query` and/or a new key at `key` (-1 where the
  // token is not one: a context token is only a key, a query token of cross-attention only a query). A rule
  // (none, causal, sliding_window) needs no change; a padding mask gets the flag 1 for a new key (a new
  // token is a real token, not padding); a custom mask grows as grow() says.
  function insert(mask, query, key, sizes) {
    var out = copy(mask);
    var kind = kindOf(mask);
    var each = perItem(mask, sizes.batch);
    if (kind === 'padding' && key >= 0) {
      (each ? out.keep : [out.keep]).forEach(function (flags) { flags.splice(key, 0, 1); });
    } else if (kind === 'custom') {
      out.allow = each ? out.allow.map(function (a) { return grow(a, query, key); }) : grow(out.allow, query, key);
    }
    return out;
  }

  // The mask after a token is removed: query `query` and/or key `key` (-1 where the token is not one).
  function remove(mask, query, key, sizes) {
    var out = copy(mask);
    var kind = kindOf(mask);
    var each = perItem(mask, sizes.batch);
    if (kind === 'padding' && key >= 0) {
      (each ? out.keep : [out.keep]).forEach(function (flags) { flags.splice(key, 1); });
    } else if (kind === 'custom') {
      out.allow = each ? out.allow.map(function (a) { return shrink(a, query, key); }) : shrink(out.allow, query, key);
    }
    return out;
  }

  // -- a new mask ---------------------------------------------------------------------------------------------

  function checkFlags(flags, m, where) {
    if (!Array.isArray(flags) || flags.length !== m) fail(where + ': expected ' + m + ' flags (one per key)');
    flags.forEach(function (f) {
      if (f !== 0 && f !== 1) fail(where + ': expected flags of 0 or 1, found ' + JSON.stringify(f));
    });
  }

  function checkKeep(keep, sizes) {
    if (sizes.batch && Array.isArray(keep) && Array.isArray(keep[0])) {
      if (keep.length !== sizes.batch) fail('setMask: expected ' + sizes.batch + ' lists of flags (one per item)');
      keep.forEach(function (flags) { checkFlags(flags, sizes.m, 'setMask'); });
    } else {
      checkFlags(keep, sizes.m, 'setMask');
    }
  }

  function checkMatrix(a, sizes) {
    if (!Array.isArray(a) || a.length !== sizes.n) fail('setMask: expected ' + sizes.n + ' rows (one per query)');
    a.forEach(function (row) {
      if (!Array.isArray(row) || row.length !== sizes.m) fail('setMask: expected rows of ' + sizes.m + ' booleans');
      row.forEach(function (v) { if (typeof v !== 'boolean') fail('setMask: expected true or false in allow'); });
    });
  }

  function checkAllow(allow, sizes) {
    if (sizes.batch && Array.isArray(allow) && Array.isArray(allow[0]) && Array.isArray(allow[0][0])) {
      if (allow.length !== sizes.batch) fail('setMask: expected ' + sizes.batch + ' matrices (one per item)');
      allow.forEach(function (a) { checkMatrix(a, sizes); });
    } else {
      checkMatrix(allow, sizes);
    }
  }

  // The mask of kind `kind` in place of `mask`. options: {align} for causal and sliding_window (else the
  // current mask's align is kept), {window} for sliding_window (else the current window, else 2), {keep} for
  // padding (else the current flags, else 1 for every key), {allow} for custom (else what the current mask
  // allows, so switching to custom keeps every decision). A causal mask without align is written "causal".
  function make(mask, kind, options, sizes) {
    options = options || {};
    if (KINDS.indexOf(kind) < 0) fail('setMask: unknown mask kind ' + JSON.stringify(kind) + '; expected one of ' +
                                      KINDS.join(', '));
    var align = options.align !== undefined ? options.align : alignOf(mask);
    if (align !== undefined && ALIGNS.indexOf(align) < 0) {
      fail('setMask: align is "top_left" or "bottom_right", not ' + JSON.stringify(align));
    }
    var out = { type: kind };
    if (kind === 'none') return 'none';
    if (kind === 'causal') {
      if (align === undefined) return 'causal';
      out.align = align;
    } else if (kind === 'sliding_window') {
      var w = options.window !== undefined ? options.window : kindOf(mask) === 'sliding_window' ? mask.window : 2;
      if (!isWhole(w) || w < 1) fail('setMask: the window is a whole number of at least 1, not ' + JSON.stringify(w));
      out.window = w;
      if (align !== undefined) out.align = align;
    } else if (kind === 'padding') {
      var keep = options.keep !== undefined ? copy(options.keep) : kindOf(mask) === 'padding' ? copy(mask.keep) : null;
      if (keep === null) {
        keep = [];
        for (var j = 0; j < sizes.m; j++) keep.push(1);
      }
      checkKeep(keep, sizes);
      out.keep = keep;
    } else {
      var allow = options.allow !== undefined ? copy(options.allow) : allowed(mask, sizes);
      checkAllow(allow, sizes);
      out.allow = allow;
    }
    return out;
  }

  // A custom mask with the decision of query i and key j flipped. A batch item `item` flips it in that
  // item alone (a shared matrix then becomes one matrix per item); without `item` the shared matrix flips,
  // or every item's when the mask is per item.
  function toggle(mask, i, j, item, sizes) {
    if (!isWhole(i) || i < 0 || i >= sizes.n) fail('toggleMaskCell: query ' + i + ' is not in 0 … ' + (sizes.n - 1));
    if (!isWhole(j) || j < 0 || j >= sizes.m) fail('toggleMaskCell: key ' + j + ' is not in 0 … ' + (sizes.m - 1));
    var given = item !== undefined && item !== null;
    if (given && (!isWhole(item) || item < 0 || item >= Math.max(sizes.batch, 1))) {
      fail('toggleMaskCell: batch item ' + item + ' is not in the input (batch ' + sizes.batch + ')');
    }
    var a = allowed(mask, sizes);
    var each = perItem(mask, sizes.batch);
    if (given && sizes.batch && !each) {
      var items = [];
      for (var b = 0; b < sizes.batch; b++) items.push(copy(a));
      a = items;
      each = true;
    }
    (each ? a : [a]).forEach(function (matrix, b) {
      if (!each || !given || b === item) matrix[i][j] = !matrix[i][j];
    });
    return { type: 'custom', allow: a };
  }

  return {
    KINDS: KINDS, kindOf: kindOf, perItem: perItem, allowed: allowed, insert: insert, remove: remove, make: make,
    toggle: toggle, grow: grow
  };
})();
