/* attn-trace explorer (docs/explorer.md): the bar of controls. The page's settings under the command
   line's names (dtype, engine, block-q, block-k, backward), undo and redo (also Ctrl+Z and Ctrl+Shift+Z
   or Ctrl+Y, outside a text field), reset, the bundled examples, the input and the trace as files, and
   the link. It holds no state of its own: `on` says what each control asks for (explorer.js keeps the
   input, the settings and the history), and `show` and `history` set the controls to what is shown. */
var AttnControls = function (on) {  // eslint-disable-line no-unused-vars
  'use strict';

  var byId = function (id) { return document.getElementById(id); };
  var dtype = byId('dtype');
  var engine = byId('engine');
  var blockQ = byId('block-q');
  var blockK = byId('block-k');
  var backward = byId('backward');
  var undo = byId('undo');
  var redo = byId('redo');
  var example = byId('example');
  var linkField = byId('link');
  var said = byId('said');

  function say(text) {
    said.textContent = text;
  }

  // A tile size as typed: a whole number from 1, or 0 (the default, about √n) when the field is empty.
  function tileOf(field) {
    var t = field.value.trim();
    if (t === '') return 0;
    return /^[1-9][0-9]{0,6}$/.test(t) ? Number(t) : null;
  }

  dtype.addEventListener('change', function () { on.settings({ dtype: dtype.value }); });
  engine.addEventListener('change', function () { on.settings({ engine: engine.value }); });
  backward.addEventListener('change', function () { on.settings({ backward: backward.checked }); });
  [[blockQ, 'block_q'], [blockK, 'block_k']].forEach(function (pair) {
    pair[0].addEventListener('change', function () {
      var n = tileOf(pair[0]);
      var change = {};
      change[pair[1]] = n;
      if (n === null) {
        say(pair[0].id + ': a whole number of at least 1, or empty for the default');
        on.settings({});  // shows the current value again
        return;
      }
      say('');
      on.settings(change);
    });
  });

  undo.addEventListener('click', function () { on.undo(); });
  redo.addEventListener('click', function () { on.redo(); });
  byId('reset').addEventListener('click', function () { on.reset(); });
  example.addEventListener('change', function () {
    var chosen = example.selectedOptions[0];
    if (chosen && chosen.value !== '') on.example(chosen.getAttribute('data-text'));
    example.value = '';
  });

  // Ctrl+Z and Ctrl+Shift+Z (or Ctrl+Y) undo and redo the page's edits; in a text field they stay the
  // field's own.
  document.addEventListener('keydown', function (e) {
    if (!(e.ctrlKey || e.metaKey) || e.altKey) return;
    var t = e.target;
    if (t && (t.tagName === 'TEXTAREA' || (t.tagName === 'INPUT' && t.type !== 'checkbox'))) return;
    var key = e.key.toLowerCase();
    if (key === 'z' && !e.shiftKey) on.undo();
    else if ((key === 'z' && e.shiftKey) || key === 'y') on.redo();
    else return;
    e.preventDefault();
  });

  function download(name, text, type) {
    var url = URL.createObjectURL(new Blob([text], { type: type }));
    var a = document.createElement('a');
    a.href = url;
    a.download = name;
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(function () { URL.revokeObjectURL(url); }, 10000);
  }
  byId('download-input').addEventListener('click', function () {
    download('input.json', on.input(), 'application/json');
  });
  byId('download-trace').addEventListener('click', function () {
    download('trace.json', on.trace(), 'application/json');
  });

  // The link into the field beside the button, selected, and onto the clipboard where the browser lets
  // a page write there.
  byId('copy-link').addEventListener('click', function () {
    linkField.value = on.link();
    linkField.hidden = false;
    linkField.focus();
    linkField.select();
    var copied = false;
    try {
      copied = document.execCommand('copy');
    } catch (e) {
      copied = false;
    }
    if (!copied && navigator.clipboard) {
      navigator.clipboard.writeText(linkField.value).then(function () { say('the link is copied'); },
                                                          function () { say('the link is selected: copy it'); });
      return;
    }
    say(copied ? 'the link is copied' : 'the link is selected: copy it');
  });

  return {
    // The controls as the shown state's settings.
    show: function (settings) {
      dtype.value = settings.dtype;
      engine.value = settings.engine;
      backward.checked = !!settings.backward;
      var tiles = settings.engine !== 'naive';
      blockQ.disabled = blockK.disabled = !tiles;
      blockQ.value = settings.block_q ? String(settings.block_q) : '';
      blockK.value = settings.block_k ? String(settings.block_k) : '';
    },
    history: function (index, count) {
      undo.disabled = index <= 0;
      redo.disabled = index >= count - 1;
    },
    // The bundled examples (the core's list: name, description, text) in the menu.
    examples: function (list) {
      list.forEach(function (ex) {
        var option = document.createElement('option');
        option.value = ex.name;
        option.textContent = ex.name;
        option.title = ex.description;
        option.setAttribute('data-text', ex.text);
        example.appendChild(option);
      });
    }
  };
};
