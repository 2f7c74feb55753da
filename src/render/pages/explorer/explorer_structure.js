/* attn-trace explorer (docs/explorer.md): the input's structure, editable. The tokens (rename, add,
   remove), the sizes (heads, key/value heads, d_k, d_v), the mask (its kind, window and alignment, and
   a grid of its decisions whose cells flip one query-key pair), the scale, and each optional feature the
   core offers (RoPE, ALiBi, softcap, sinks, dropout: io/features.hpp's table, one control of its kind). Each control makes its edit with AttnEdits (explorer_edits.js) on the input shown
   and hands the new input to `on.edit`, which runs it like any other edit; an edit that the input format
   would not take goes to `on.fail` with its one-line reason. `show` draws the controls for an input. */
var AttnStructure = function (on) {  // eslint-disable-line no-unused-vars
  'use strict';

  var panel = document.getElementById('structure');
  var MASK_KINDS = ['none', 'causal', 'sliding_window', 'padding', 'custom'];
  var GRID_LIMIT = 4096;  // query-key pairs drawn as a grid; a larger mask is edited as JSON

  // Makes an element: el('input', {type: 'text', id: 'heads'}, [children]).
  function el(tag, attributes, children) {
    var e = document.createElement(tag);
    Object.keys(attributes || {}).forEach(function (k) {
      if (k === 'text') e.textContent = attributes[k];
      else if (k === 'checked' || k === 'disabled' || k === 'value') e[k] = attributes[k];
      else e.setAttribute(k, attributes[k]);
    });
    (children || []).forEach(function (c) { if (c) e.appendChild(c); });
    return e;
  }

  function labelled(text, control) {
    return el('label', {}, [document.createTextNode(text + ' '), control]);
  }

  // An edit of the input shown: `make(input)` returns the new input, or throws why it cannot.
  function edit(make) {
    var next;
    try {
      next = make(on.input());
    } catch (e) {
      on.fail(String(e.message || e));
      return;
    }
    on.edit(next);
  }

  // A whole number typed in a field, or null (with the reason said) when it is not one.
  function wholeIn(field, min) {
    var t = field.value.trim();
    if (!/^[0-9]{1,7}$/.test(t) || Number(t) < min) {
      on.fail(field.id + ': a whole number of at least ' + min + ', not ' + JSON.stringify(t));
      return null;
    }
    return Number(t);
  }

  // A number typed in a field; '' when the field is empty (the key left out), null when it is not a number.
  function numberIn(field) {
    var t = field.value.trim();
    if (t === '') return '';
    var x = Number(t);
    if (!isFinite(x)) {
      on.fail(field.id + ': a number, or empty to leave it out, not ' + JSON.stringify(t));
      return null;
    }
    return x;
  }

  function field(id, value, size) {
    return el('input', { id: id, type: 'text', inputmode: 'decimal', size: String(size || 4), value: value });
  }

  function onChange(control, act) {
    control.addEventListener('change', act);
    return control;
  }

  // -- tokens ------------------------------------------------------------------------------------------

  // The labels of the first item (a batch shares them or has one list per item), or t0, t1, ….
  function labels(tokens, count, prefix) {
    var list = Array.isArray(tokens) && Array.isArray(tokens[0]) ? tokens[0] : tokens;
    var out = [];
    for (var i = 0; i < count; i++) out.push(Array.isArray(list) && typeof list[i] === 'string' ? list[i] : prefix + i);
    return out;
  }

  function tokenList(title, names, context, perItem) {
    var rename = context ? AttnEdits.renameContextToken : AttnEdits.renameToken;
    var add = context ? AttnEdits.addContextToken : AttnEdits.addToken;
    var remove = context ? AttnEdits.removeContextToken : AttnEdits.removeToken;
    var list = el('ol', { class: 'tokens', id: context ? 'context-tokens' : 'tokens' });
    names.forEach(function (name, i) {
      var box = el('input', { type: 'text', size: '6', value: name, 'aria-label': title + ' ' + i });
      box.setAttribute('data-token', String(i));
      onChange(box, function () {
        edit(function (input) { return rename(input, i, box.value, perItem ? 0 : undefined); });
      });
      var minus = el('button', { type: 'button', class: 'remove', title: 'remove ' + name, text: '−' });
      minus.setAttribute('data-remove-token', String(i));
      minus.addEventListener('click', function () { edit(function (input) { return remove(input, i); }); });
      list.appendChild(el('li', {}, [box, minus]));
    });
    var plus = el('button', { type: 'button', id: context ? 'add-context-token' : 'add-token', text: '+ token' });
    plus.addEventListener('click', function () {
      edit(function (input) { return add(input, names.length, names.length + 1); });
    });
    return el('div', { class: 'group' }, [el('h3', { text: title }), list, plus]);
  }

  // -- sizes -------------------------------------------------------------------------------------------

  function sizes(shape) {
    var box = el('div', { class: 'group sizes' }, [el('h3', { text: 'sizes' })]);
    [['heads', 'heads', shape.h, AttnEdits.setHeads], ['kv-heads', 'kv heads', shape.g, AttnEdits.setKvHeads],
     ['d-k', 'd_k', shape.d_k, AttnEdits.setDk], ['d-v', 'd_v', shape.d_v, AttnEdits.setDv]].forEach(function (s) {
      var f = field(s[0], String(s[2]), 2);
      onChange(f, function () {
        var n = wholeIn(f, 1);
        if (n === null) return;
        edit(function (input) { return s[3](input, n, n + 7); });
      });
      box.appendChild(labelled(s[1], f));
    });
    return box;
  }

  // -- the mask ----------------------------------------------------------------------------------------

  function maskKind(mask) {
    if (mask === undefined || mask === null) return 'none';
    return typeof mask === 'string' ? mask : mask.type;
  }

  // One grid of decisions: a row per query, a column per key; a cell flips its pair.
  function grid(allow, queries, keys, item) {
    var table = el('table', { class: 'mask-grid' });
    table.setAttribute('data-item', String(item === null ? '' : item));
    var head = el('tr', {}, [el('th', {})]);
    keys.forEach(function (k) { head.appendChild(el('th', { scope: 'col', text: k })); });
    table.appendChild(head);
    allow.forEach(function (row, i) {
      var tr = el('tr', {}, [el('th', { scope: 'row', text: queries[i] })]);
      row.forEach(function (ok, j) {
        var td = el('td', { class: ok ? 'on' : 'off', tabindex: '0', title: queries[i] + ' → ' + keys[j] + ': ' +
                            (ok ? 'may attend' : 'masked') });
        td.setAttribute('data-mask', (item === null ? '' : item) + '/' + i + '/' + j);
        tr.appendChild(td);
      });
      table.appendChild(tr);
    });
    table.addEventListener('click', function (e) {
      var td = e.target.closest('td[data-mask]');
      if (!td) return;
      var at = td.getAttribute('data-mask').split('/');
      edit(function (input) {
        return AttnEdits.toggleMaskCell(input, Number(at[1]), Number(at[2]), at[0] === '' ? undefined : Number(at[0]));
      });
    });
    table.addEventListener('keydown', function (e) {
      if ((e.key === 'Enter' || e.key === ' ') && e.target.matches('td[data-mask]')) {
        e.preventDefault();
        e.target.click();
      }
    });
    return el('div', { class: 'scroll' }, [table]);
  }

  function maskPanel(input, shape, queries, keys) {
    var mask = input.mask;
    var kind = maskKind(mask);
    var select = el('select', { id: 'mask-kind' });
    MASK_KINDS.forEach(function (k) { select.appendChild(el('option', { value: k, text: k })); });
    select.value = kind;
    onChange(select, function () { edit(function (i) { return AttnEdits.setMask(i, select.value, {}); }); });
    var box = el('div', { class: 'group mask' }, [el('h3', { text: 'mask' }), labelled('kind', select)]);
    if (kind === 'sliding_window') {
      var w = field('mask-window', String(mask.window), 2);
      onChange(w, function () {
        var n = wholeIn(w, 1);
        if (n !== null) edit(function (i) { return AttnEdits.setMask(i, 'sliding_window', { window: n }); });
      });
      box.appendChild(labelled('window', w));
    }
    if (kind === 'causal' || kind === 'sliding_window') {
      var align = el('select', { id: 'mask-align' });
      ['top_left', 'bottom_right'].forEach(function (a) { align.appendChild(el('option', { value: a, text: a })); });
      align.value = (typeof mask === 'object' && mask.align) || 'top_left';
      onChange(align, function () { edit(function (i) { return AttnEdits.setMask(i, kind, { align: align.value }); }); });
      box.appendChild(labelled('align', align));
    }
    var allow = AttnEdits.allowed(input);
    if (shape.n * shape.m * Math.max(1, shape.batch) > GRID_LIMIT) {
      box.appendChild(el('p', { class: 'hint', text: 'too many pairs to draw: edit the mask in the JSON below' }));
      return box;
    }
    box.appendChild(el('p', { class: 'hint', text: 'a row per query, a column per key: click a cell to flip it' }));
    var perItem = Array.isArray(allow[0]) && Array.isArray(allow[0][0]);
    if (!perItem) box.appendChild(grid(allow, queries, keys, null));
    else allow.forEach(function (a, b) {
      box.appendChild(el('h4', { text: 'item ' + b }));
      box.appendChild(grid(a, queries, keys, b));
    });
    return box;
  }

  // -- the rest ------------------------------------------------------------------------------------------

  function toggle(id, text, on_, act) {
    var box = el('input', { id: id, type: 'checkbox', checked: on_ });
    onChange(box, function () { edit(function (input) { return act(input, box.checked); }); });
    return el('label', {}, [box, document.createTextNode(' ' + text)]);
  }

  // A number that is left out when its field is empty.
  function optional(id, text, value, act) {
    var f = field(id, value === undefined || value === null ? '' : String(value), 5);
    f.placeholder = 'off';
    onChange(f, function () {
      var x = numberIn(f);
      if (x !== null) edit(function (input) { return act(input, x === '' ? null : x); });
    });
    return labelled(text, f);
  }

  // The input's optional features the page offers, as the core lists them (io/features.hpp's table):
  // one control each, of the kind the table names.
  var features = [];

  function copied(value) { return value === undefined ? undefined : JSON.parse(JSON.stringify(value)); }

  // A feature's control: a box that turns it on (with the table's `on`) and off; a number, blank for off;
  // or an object's numbers, the first turning it on and the others shown once it is on.
  function featureControls(f, input) {
    var value = input[f.key];
    var set = function (i, v) { return AttnEdits.setFeature(i, f.key, v); };
    if (f.kind === 'toggle') {
      return [toggle(f.key, f.label, !!value, function (i, yes) { return set(i, yes ? copied(f.on) : null); })];
    }
    if (f.kind === 'number') return [optional(f.key, f.label, value, set)];
    var current = value || {};
    var first = f.fields[0], rest = f.fields.slice(1);
    var shown = [optional(f.key + '-' + first.name, first.label, current[first.name], function (i, x) {
      if (x === null) return set(i, null);
      var next = {};
      next[first.name] = x;
      rest.forEach(function (g) { next[g.name] = current[g.name] === undefined ? g.default : current[g.name]; });
      return set(i, next);
    })];
    if (!value) return shown;
    rest.forEach(function (g) {
      shown.push(optional(f.key + '-' + g.name, g.label, current[g.name], function (i, x) {
        var next = {};
        Object.keys(current).forEach(function (k) { next[k] = current[k]; });
        next[g.name] = x === null ? g.default : x;
        return set(i, next);
      }));
    });
    return shown;
  }

  function extras(input) {
    var box = el('div', { class: 'group extras' }, [el('h3', { text: 'scores and weights' })]);
    var scale = optional('scale', 'scale', input.scale, AttnEdits.setScale);
    scale.querySelector('input').placeholder = '1/√d_k';
    box.appendChild(scale);
    features.forEach(function (f) {
      featureControls(f, input).forEach(function (control) { box.appendChild(control); });
    });
    return box;
  }

  return {
    // The features to offer (attn_features), before the first `show`.
    offer: function (list) { features = list; },
    // The controls of `input` (the one shown), drawn again whole.
    show: function (input) {
      panel.textContent = '';
      var shape;
      try {
        shape = AttnEdits.shape(input);
      } catch (e) {
        return;  // an input the core took always has a shape; nothing to draw otherwise
      }
      var perItem = Array.isArray(input.tokens) && Array.isArray(input.tokens[0]);
      var queries = labels(input.tokens, shape.n, 't');
      var keys = shape.cross ? labels(input.context.tokens, shape.m, 'c') : queries;
      panel.appendChild(tokenList('tokens', queries, false, perItem));
      if (shape.cross) {
        var contextPerItem = Array.isArray(input.context.tokens) && Array.isArray(input.context.tokens[0]);
        panel.appendChild(tokenList('context tokens', keys, true, contextPerItem));
      }
      panel.appendChild(sizes(shape));
      panel.appendChild(maskPanel(input, shape, queries, keys));
      panel.appendChild(extras(input));
    }
  };
};
