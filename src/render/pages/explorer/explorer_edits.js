/* attn-trace explorer (docs/explorer.md): structural edits of an input (docs/input-format.md), for the page's
   controls. Every function takes an input as JSON.parse gives it and returns a new one, a deep copy with the
   edit made; the argument is never changed. A number that still has a place keeps its index; a new place
   gets a "seeded" number: drawn from a small generator seeded by the edit's `seed` (default 1), rounded to
   two decimals in [-1, 1], so that the same edit gives the same numbers every time. Keys that an edit does
   not need are left as they were, in their order; a key it adds goes at the end. An edit that the input
   format would refuse (removing the last token, n_kv_heads not dividing n_heads, …) throws an Error with
   a one-line message that names the function. The mask's rules and its custom matrix are explorer_mask.js
   (AttnMask), which must be loaded first. */
var AttnEdits = (function (Mask) {
  'use strict';

  var DEFAULT_SEED = 1;

  // -- copies, numbers and checks --------------------------------------------------------------------------

  function copy(value) {
    return JSON.parse(JSON.stringify(value));
  }

  function fail(fn, message) {
    throw new Error(fn + ': ' + message);
  }

  function isWhole(x) {
    return typeof x === 'number' && isFinite(x) && Math.floor(x) === x;
  }

  function whole(fn, name, x, min, max) {
    if (!isWhole(x) || x < min || (max !== undefined && x > max)) {
      var range = max === undefined ? 'of at least ' + min : 'in ' + min + ' … ' + max;
      fail(fn, name + ' must be a whole number ' + range + ', not ' + JSON.stringify(x));
    }
    return x;
  }

  // The seeded numbers of one edit: xorshift32 from the seed, its state first stirred by a multiplication
  // and a few rounds so that nearby seeds start far apart. Each call gives the next number, a multiple of
  // 0.01 in [-1, 1].
  function numbers(fn, seed) {
    if (seed === undefined || seed === null) seed = DEFAULT_SEED;
    if (!isWhole(seed)) fail(fn, 'the seed must be a whole number, not ' + JSON.stringify(seed));
    var x = (Math.imul(seed | 0, 0x9e3779b1) ^ 0x5bd1e995) >>> 0 || 1;
    var step = function () {
      x ^= x << 13;
      x ^= x >>> 17;
      x ^= x << 5;
      x >>>= 0;
      return x;
    };
    for (var k = 0; k < 4; k++) step();
    return function () {
      var v = Math.round((step() / 4294967296 * 2 - 1) * 100) / 100;
      return v === 0 ? 0 : v;  // never -0
    };
  }

  function row(draw, width) {
    var out = [];
    for (var k = 0; k < width; k++) out.push(draw());
    return out;
  }

  function isBatch(X) {
    return Array.isArray(X) && Array.isArray(X[0]) && Array.isArray(X[0][0]);
  }

  // The matrices of a sequence: its batch items, or the one matrix.
  function itemsOf(X) {
    return isBatch(X) ? X : [X];
  }

  // Sets obj[key]: in its place when the key is there, at the end when it is new.
  function put(obj, key, value) {
    obj[key] = value;
  }

  // -- sizes -----------------------------------------------------------------------------------------------

  // How many outputs a weight has in the file's layout: its columns in in_out, its rows in out_in.
  function outputsOf(w, layout) {
    return layout === 'out_in' ? w.length : w[0].length;
  }

  // The sizes as the input format works them out. batch is 0 for a single sequence, d_context 0 for
  // self-attention and d_out 0 without W_o (the output is then h·d_v wide).
  function shape(input) {
    var batched = isBatch(input.X);
    var first = batched ? input.X[0] : input.X;
    var cross = input.context !== undefined;
    var ctx = cross ? (batched ? input.context.X[0] : input.context.X) : null;
    var h = input.n_heads !== undefined ? input.n_heads : 1;
    var g = input.n_kv_heads !== undefined ? input.n_kv_heads : h;
    var layout = input.layout !== undefined ? input.layout : 'in_out';
    return {
      batch: batched ? input.X.length : 0,
      n: first.length,
      m: cross ? ctx.length : first.length,
      d_model: first[0].length,
      d_context: cross ? ctx[0].length : 0,
      h: h,
      g: g,
      d_k: outputsOf(input.W_q, layout) / h,
      d_v: outputsOf(input.W_v, layout) / g,
      d_out: input.W_o !== undefined ? outputsOf(input.W_o, layout) : 0,
      layout: layout,
      cross: cross
    };
  }

  // -- tokens ----------------------------------------------------------------------------------------------

  // The labels' lists of a `tokens` value: one per batch item, or the one list that is shared.
  function labelLists(tokens) {
    return Array.isArray(tokens[0]) ? tokens : [tokens];
  }

  // The first of "new", "new2", "new3", … that no list of labels holds.
  function freshName(tokens) {
    var used = {};
    labelLists(tokens).forEach(function (list) { list.forEach(function (t) { used[t] = true; }); });
    var name = 'new';
    for (var k = 2; used[name]; k++) name = 'new' + k;
    return name;
  }

  // The labels with label i renamed: in every list, or with `item` in that batch item's alone (a shared
  // list, or the default labels `prefix`0, `prefix`1, …, then becoming one list per item).
  function renamed(fn, tokens, count, batch, prefix, i, name, item) {
    whole(fn, 'the token', i, 0, count - 1);
    if (typeof name !== 'string') fail(fn, 'a token\'s name is a string, not ' + JSON.stringify(name));
    var given = item !== undefined && item !== null;
    if (given) whole(fn, 'the batch item', item, 0, Math.max(batch, 1) - 1);
    if (tokens === undefined) {
      tokens = [];
      for (var k = 0; k < count; k++) tokens.push(prefix + k);
    }
    if (given && batch && !Array.isArray(tokens[0])) {
      var shared = tokens;
      tokens = [];
      for (var b = 0; b < batch; b++) tokens.push(shared.slice());
    }
    labelLists(tokens).forEach(function (list, b) {
      if (!given || !batch || b === item) list[i] = name;
    });
    return tokens;
  }

  // Rope positions after a token is inserted at `at` (removed when `removed`): a list counting up by one
  // (0, 1, 2, … or p, p + 1, …) keeps counting from its first; any other list gets the position after the
  // one before the new token (or one before the first, at least 0), or loses the removed one.
  function positioned(list, at, removed) {
    var counting = list.every(function (p, k) { return p === list[0] + k; });
    var out = list.slice();
    if (removed) out.splice(at, 1);
    else out.splice(at, 0, at > 0 ? list[at - 1] + 1 : Math.max(0, list[0] - 1));
    if (counting && out.length) out = out.map(function (p, k) { return list[0] + k; });
    return out;
  }

  // A token inserted at `at` of the queries (`context` false) or of the context (true), or removed from
  // them (`removed`). Besides the rows of X and the labels, everything whose size is the number of those
  // tokens follows: dY's rows (queries), the mask's queries or keys (in self-attention the query tokens are
  // the keys too) and rope's positions.
  function retoken(fn, input, at, seed, context, removed) {
    var s = shape(input);
    if (context && !s.cross) fail(fn, 'the input has no context (it is self-attention)');
    var count = context ? s.m : s.n;
    if (removed) {
      whole(fn, 'the token', at, 0, count - 1);
      if (count === 1) fail(fn, 'cannot remove the last token: ' + (context ? 'the context\'s X' : 'X') +
                                ' needs at least one row');
    } else {
      whole(fn, 'the place', at, 0, count);
    }
    var draw = removed ? null : numbers(fn, seed);
    var out = copy(input);
    var owner = context ? out.context : out;
    var width = context ? s.d_context : s.d_model;
    itemsOf(owner.X).forEach(function (x) {
      if (removed) x.splice(at, 1);
      else x.splice(at, 0, row(draw, width));
    });
    if (owner.tokens !== undefined) {
      var name = removed ? null : freshName(owner.tokens);
      labelLists(owner.tokens).forEach(function (list) {
        if (removed) list.splice(at, 1);
        else list.splice(at, 0, name);
      });
    }
    if (!context && out.dY !== undefined) {
      itemsOf(out.dY).forEach(function (dy) {
        if (removed) dy.splice(at, 1);
        else dy.splice(at, 0, row(draw, dy[0].length));
      });
    }
    if (out.mask !== undefined) {
      var query = context ? -1 : at;
      var key = context || !s.cross ? at : -1;
      out.mask = removed ? Mask.remove(out.mask, query, key, s) : Mask.insert(out.mask, query, key, s);
    }
    var rope = out.rope;
    var which = context ? 'context_positions' : 'positions';
    if (rope !== null && typeof rope === 'object' && Array.isArray(rope[which])) {
      rope[which] = positioned(rope[which], at, removed);
    }
    return out;
  }

  function renameToken(input, i, name, item) {
    var s = shape(input);
    var out = copy(input);
    put(out, 'tokens', renamed('renameToken', out.tokens, s.n, s.batch, 't', i, name, item));
    return out;
  }

  function renameContextToken(input, j, name, item) {
    var s = shape(input);
    if (!s.cross) fail('renameContextToken', 'the input has no context (it is self-attention)');
    var out = copy(input);
    put(out.context, 'tokens', renamed('renameContextToken', out.context.tokens, s.m, s.batch, 'c', j, name, item));
    return out;
  }

  function addToken(input, at, seed) { return retoken('addToken', input, at, seed, false, false); }
  function removeToken(input, i) { return retoken('removeToken', input, i, null, false, true); }
  function addContextToken(input, at, seed) { return retoken('addContextToken', input, at, seed, true, false); }
  function removeContextToken(input, j) { return retoken('removeContextToken', input, j, null, true, true); }

  // -- heads and their widths ------------------------------------------------------------------------------

  // A list of heads·width places (the columns of a projection, the rows of W_o, …) made into one of
  // now.heads·now.width: place (head, k) keeps its value while the head and k survive, and the new places
  // are made by `make`. Heads split a projection's outputs head-major: head i holds [i·width, (i + 1)·width).
  function blocks(list, was, now, make) {
    var out = [];
    for (var head = 0; head < now.heads; head++) {
      for (var k = 0; k < now.width; k++) {
        out.push(head < was.heads && k < was.width ? list[head * was.width + k] : make());
      }
    }
    return out;
  }

  // A weight with its outputs regrouped (in_out: the columns of each row; out_in: the rows).
  function outputsTo(w, layout, was, now, draw) {
    if (layout === 'out_in') {
      var width = w[0].length;
      return blocks(w, was, now, function () { return row(draw, width); });
    }
    return w.map(function (r) { return blocks(r, was, now, draw); });
  }

  // W_o with its inputs regrouped (in_out: its rows; out_in: the columns of each row).
  function inputsTo(w, layout, was, now, draw) {
    if (layout === 'out_in') return w.map(function (r) { return blocks(r, was, now, draw); });
    var width = w[0].length;
    return blocks(w, was, now, function () { return row(draw, width); });
  }

  // The input with h query heads and g key/value heads of widths d_k and d_v (`now`): every weight, bias and
  // per-head list that these sizes shape follows, each keeping the blocks of the heads that survive.
  function reshape(fn, input, now, seed) {
    var s = shape(input);
    var draw = numbers(fn, seed);
    var out = copy(input);
    var L = s.layout;
    var q = [{ heads: s.h, width: s.d_k }, { heads: now.h, width: now.d_k }];
    var k = [{ heads: s.g, width: s.d_k }, { heads: now.g, width: now.d_k }];
    var v = [{ heads: s.g, width: s.d_v }, { heads: now.g, width: now.d_v }];
    var o = [{ heads: s.h, width: s.d_v }, { heads: now.h, width: now.d_v }];
    var perHead = [{ heads: s.h, width: 1 }, { heads: now.h, width: 1 }];
    out.W_q = outputsTo(out.W_q, L, q[0], q[1], draw);
    if (out.b_q !== undefined) out.b_q = blocks(out.b_q, q[0], q[1], draw);
    out.W_k = outputsTo(out.W_k, L, k[0], k[1], draw);
    if (out.b_k !== undefined) out.b_k = blocks(out.b_k, k[0], k[1], draw);
    out.W_v = outputsTo(out.W_v, L, v[0], v[1], draw);
    if (out.b_v !== undefined) out.b_v = blocks(out.b_v, v[0], v[1], draw);
    if (out.W_o !== undefined) out.W_o = inputsTo(out.W_o, L, o[0], o[1], draw);
    else if (out.dY !== undefined) {
      itemsOf(out.dY).forEach(function (dy) {
        for (var i = 0; i < dy.length; i++) dy[i] = blocks(dy[i], o[0], o[1], draw);
      });
    }
    if (Array.isArray(out.sinks)) out.sinks = blocks(out.sinks, perHead[0], perHead[1], draw);
    // ALiBi's slopes are penalties: a new head's is drawn as the size of a seeded number, in [0, 1].
    if (Array.isArray(out.alibi)) {
      out.alibi = blocks(out.alibi, perHead[0], perHead[1], function () { return Math.abs(draw()); });
    }
    if (out.rope !== undefined && now.d_k !== s.d_k) out.rope = ropeFor(fn, out.rope, now.d_k);
    if (input.n_heads !== undefined || now.h !== 1) put(out, 'n_heads', now.h);
    if (input.n_kv_heads !== undefined || now.g !== now.h) put(out, 'n_kv_heads', now.g);
    return out;
  }

  // The rope object for heads of width d_k: features turn in pairs, so `dims` is even and at most d_k; a
  // larger one is cut to the largest even number <= d_k, and an odd d_k without dims gets dims = d_k - 1.
  function ropeFor(fn, rope, d_k) {
    if (d_k < 2) fail(fn, 'rope turns features in pairs and needs d_k >= 2 (remove rope first)');
    var out = copy(rope);
    var even = d_k - d_k % 2;
    if (out.dims !== undefined) out.dims = Math.min(out.dims, even);
    else if (d_k % 2 !== 0) out.dims = even;
    return out;
  }

  // The largest divisor of h that is at most `most`.
  function divisorAtMost(h, most) {
    for (var d = Math.min(h, most); d > 1; d--) if (h % d === 0) return d;
    return 1;
  }

  // h query heads. Multi-head attention (g = h) stays multi-head: g follows h. Grouped-query or multi-query
  // attention keeps its g when it divides the new h, else takes the largest divisor of h below it (4 heads
  // sharing 2 key/value heads, made 3 heads, share 1).
  function setHeads(input, h, seed) {
    var s = shape(input);
    whole('setHeads', 'n_heads', h, 1, 65536);
    var g = s.g === s.h ? h : h % s.g === 0 ? s.g : divisorAtMost(h, s.g);
    return reshape('setHeads', input, { h: h, g: g, d_k: s.d_k, d_v: s.d_v }, seed);
  }

  function setKvHeads(input, g, seed) {
    var s = shape(input);
    whole('setKvHeads', 'n_kv_heads', g, 1, s.h);
    if (s.h % g !== 0) fail('setKvHeads', 'n_kv_heads = ' + g + ' does not divide n_heads = ' + s.h);
    return reshape('setKvHeads', input, { h: s.h, g: g, d_k: s.d_k, d_v: s.d_v }, seed);
  }

  function setDk(input, d_k, seed) {
    var s = shape(input);
    whole('setDk', 'd_k', d_k, 1, 65536);
    return reshape('setDk', input, { h: s.h, g: s.g, d_k: d_k, d_v: s.d_v }, seed);
  }

  function setDv(input, d_v, seed) {
    var s = shape(input);
    whole('setDv', 'd_v', d_v, 1, 65536);
    return reshape('setDv', input, { h: s.h, g: s.g, d_k: s.d_k, d_v: d_v }, seed);
  }

  // -- the mask --------------------------------------------------------------------------------------------

  // What the mask allows: n × m booleans, or one such matrix per batch item when the mask holds one list of
  // flags or one matrix per item.
  function allowed(input) {
    return Mask.allowed(input.mask, shape(input));
  }

  // The mask of `kind` (AttnMask.make says which options each takes). "none" on an input without a mask
  // leaves it without one.
  function setMask(input, kind, options) {
    var out = copy(input);
    var mask = Mask.make(input.mask, kind, options, shape(input));
    if (mask === 'none' && input.mask === undefined) return out;
    put(out, 'mask', mask);
    return out;
  }

  // The mask made custom (from its current decisions) with query i's decision on key j flipped; `item`
  // picks one batch item (AttnMask.toggle).
  function toggleMaskCell(input, i, j, item) {
    var out = copy(input);
    put(out, 'mask', Mask.toggle(input.mask, i, j, item, shape(input)));
    return out;
  }

  // -- the other keys --------------------------------------------------------------------------------------

  // A copy with `key` set to `value`, or removed when `value` is null or undefined.
  function keyed(input, key, value) {
    var out = copy(input);
    if (value === null || value === undefined) delete out[key];
    else put(out, key, value);
    return out;
  }

  function finite(fn, name, x) {
    if (typeof x !== 'number' || !isFinite(x)) fail(fn, name + ' must be a finite number, not ' + JSON.stringify(x));
    return x;
  }

  function setScale(input, value) {
    if (value !== null && value !== undefined) finite('setScale', 'the scale', value);
    return keyed(input, 'scale', value);
  }

  function setSoftcap(input, c) {
    if (c !== null && c !== undefined && !(finite('setSoftcap', 'the cap', c) > 0)) {
      fail('setSoftcap', 'the cap must be above 0, not ' + c);
    }
    return keyed(input, 'softcap', c);
  }

  // One number per query head, checked.
  function perHeadList(fn, list, h) {
    if (!Array.isArray(list) || list.length !== h) {
      fail(fn, 'expected a list of ' + h + ' numbers (one per query head)');
    }
    list.forEach(function (x) { finite(fn, 'each entry', x); });
    return list.slice();
  }

  // true: ALiBi's standard slopes; a list: one slope per query head; null or false: no ALiBi.
  function setAlibi(input, value) {
    if (value === false) value = null;
    if (Array.isArray(value)) value = perHeadList('setAlibi', value, shape(input).h);
    else if (value !== null && value !== undefined && value !== true) {
      fail('setAlibi', 'expected true, a list of slopes or null, not ' + JSON.stringify(value));
    }
    return keyed(input, 'alibi', value);
  }

  // A list: one sink logit per query head; true: seeded logits, one per head; null: no sinks.
  function setSinks(input, value, seed) {
    var h = shape(input).h;
    if (value === true) value = row(numbers('setSinks', seed), h);
    else if (value !== null && value !== undefined) value = perHeadList('setSinks', value, h);
    return keyed(input, 'sinks', value);
  }

  // {p, seed}: dropout of the weights with probability p, its keep mask drawn from the seed (the tool's 0
  // when left out); null: no dropout.
  function setDropout(input, dropout) {
    if (dropout === null || dropout === undefined) return keyed(input, 'dropout', null);
    var p = dropout.p;
    if (typeof p !== 'number' || !(p >= 0 && p < 1)) fail('setDropout', 'p must be a number with 0 <= p < 1');
    var value = { p: p };
    if (dropout.seed !== undefined) {
      value.seed = whole('setDropout', 'the seed', dropout.seed, 0, Number.MAX_SAFE_INTEGER);
    }
    return keyed(input, 'dropout', value);
  }

  // The input with the optional feature `key` (the features the core lists, io/features.hpp) set to
  // `value`, or removed when it is null: through the feature's own setter where it has one, with its
  // checks (sinks' `true` draws seeded logits), else as given, for the core's loader to check.
  var FEATURE_SETTERS = {
    rope: function (input, value) { return setRope(input, value); },
    alibi: function (input, value) { return setAlibi(input, value); },
    softcap: function (input, value) { return setSoftcap(input, value); },
    sinks: function (input, value) { return setSinks(input, value, 11); },
    dropout: function (input, value) { return setDropout(input, value); }
  };
  function setFeature(input, key, value) {
    var own = FEATURE_SETTERS[key];
    return own ? own(input, value) : keyed(input, key, value);
  }

  // Rope's keys merged into the input's rope (created when there is none): a key given as null is removed.
  // `dims` is then kept even and at most d_k (ropeFor), and the positions must count the tokens. null
  // removes rope.
  function setRope(input, options) {
    if (options === null || options === undefined) return keyed(input, 'rope', null);
    var fn = 'setRope';
    var s = shape(input);
    var rope = input.rope !== undefined && input.rope !== null ? copy(input.rope) : {};
    Object.keys(options).forEach(function (key) {
      if (['theta', 'positions', 'context_positions', 'style', 'dims'].indexOf(key) < 0) {
        fail(fn, 'unknown rope key ' + JSON.stringify(key));
      }
      if (options[key] === null) delete rope[key];
      else rope[key] = copy(options[key]);
    });
    if (rope.theta !== undefined && !(finite(fn, 'theta', rope.theta) > 0)) fail(fn, 'theta must be above 0');
    if (rope.style !== undefined && rope.style !== 'half' && rope.style !== 'interleaved') {
      fail(fn, 'style is "half" or "interleaved", not ' + JSON.stringify(rope.style));
    }
    if (rope.dims !== undefined && (whole(fn, 'dims', rope.dims, 2) % 2 !== 0)) fail(fn, 'dims must be even');
    if (rope.context_positions !== undefined && !s.cross) {
      fail(fn, 'context_positions are for cross-attention; in self-attention the keys take positions');
    }
    [['positions', s.n], ['context_positions', s.m]].forEach(function (pair) {
      var list = rope[pair[0]];
      if (list === undefined) return;
      if (!Array.isArray(list) || list.length !== pair[1]) fail(fn, pair[0] + ' needs ' + pair[1] + ' positions');
      list.forEach(function (p) { whole(fn, 'a position', p, 0, 16777216); });
    });
    return keyed(input, 'rope', ropeFor(fn, rope, s.d_k));
  }

  // The number at `path` (["X", 0, 1]) set to `value`; the path must lead to a number.
  function setNumber(input, path, value) {
    var fn = 'setNumber';
    if (!Array.isArray(path) || path.length === 0) fail(fn, 'the path is a non-empty list of keys and indices');
    finite(fn, 'the value', value);
    var out = copy(input);
    var owner = out;
    for (var k = 0; k < path.length - 1; k++) {
      owner = owner !== null && typeof owner === 'object' ? owner[path[k]] : undefined;
    }
    var last = path[path.length - 1];
    var ok = owner !== null && typeof owner === 'object' && Object.prototype.hasOwnProperty.call(owner, last);
    if (!ok || typeof owner[last] !== 'number') fail(fn, 'no number at ' + JSON.stringify(path));
    owner[last] = value;
    return out;
  }

  return {
    DEFAULT_SEED: DEFAULT_SEED,
    shape: shape,
    renameToken: renameToken,
    addToken: addToken,
    removeToken: removeToken,
    renameContextToken: renameContextToken,
    addContextToken: addContextToken,
    removeContextToken: removeContextToken,
    setHeads: setHeads,
    setKvHeads: setKvHeads,
    setDk: setDk,
    setDv: setDv,
    allowed: allowed,
    setMask: setMask,
    toggleMaskCell: toggleMaskCell,
    setScale: setScale,
    setRope: setRope,
    setAlibi: setAlibi,
    setSoftcap: setSoftcap,
    setSinks: setSinks,
    setDropout: setDropout,
    setFeature: setFeature,
    setNumber: setNumber
  };
  /* global AttnMask */
})(AttnMask);
