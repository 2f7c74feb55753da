/* attn-trace explorer (docs/explorer.md): the page's link. A link is the whole example: the input as
   #input= (base64url of its UTF-8 text, padding optional) and the page's own settings after it, under the
   command line's option names: &dtype=…&engine=…&block-q=…&block-k=…&backward=1. Only what differs from
   nothing is written: the tiles when set, backward when on. */
var AttnLink = (function () {
  'use strict';

  var ENGINES = ['naive', 'flash', 'both'];
  var DTYPES = ['float32', 'float64', 'float16', 'bfloat16'];

  function encode(text) {
    var bytes = new TextEncoder().encode(text);
    var binary = '';
    for (var i = 0; i < bytes.length; i += 0x8000)
      binary += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
    return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
  }

  // The text that base64url `b64` holds; throws when it is not base64 of UTF-8.
  function decode(b64) {
    b64 = b64.replace(/-/g, '+').replace(/_/g, '/').replace(/=+$/, '');
    while (b64.length % 4) b64 += '=';
    var binary = atob(b64);
    var bytes = new Uint8Array(binary.length);
    for (var j = 0; j < binary.length; j++) bytes[j] = binary.charCodeAt(j);
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  }

  function tile(text) {
    return /^[1-9][0-9]{0,6}$/.test(text) ? Number(text) : null;
  }

  // What a fragment ("#input=…&dtype=…") holds: {input: text or null, settings: the settings it names}.
  // Throws when #input= is not base64url of UTF-8; a setting it does not know is left out.
  function read(hash) {
    var out = { input: null, settings: {} };
    hash.replace(/^#/, '').split('&').forEach(function (part) {
      var eq = part.indexOf('=');
      var key = eq < 0 ? part : part.slice(0, eq);
      var value = eq < 0 ? '' : decodeURIComponent(part.slice(eq + 1));
      if (key === 'input') out.input = decode(value);
      else if (key === 'dtype' && DTYPES.indexOf(value) >= 0) out.settings.dtype = value;
      else if (key === 'engine' && ENGINES.indexOf(value) >= 0) out.settings.engine = value;
      else if (key === 'block-q' && tile(value)) out.settings.block_q = tile(value);
      else if (key === 'block-k' && tile(value)) out.settings.block_k = tile(value);
      else if (key === 'backward') out.settings.backward = value === '1' || value === 'true' || value === '';
    });
    return out;
  }

  // The fragment of an input's text and the page's settings, without the leading '#'.
  function write(text, settings) {
    var parts = ['input=' + encode(text), 'dtype=' + settings.dtype, 'engine=' + settings.engine];
    if (settings.engine !== 'naive') {
      if (settings.block_q) parts.push('block-q=' + settings.block_q);
      if (settings.block_k) parts.push('block-k=' + settings.block_k);
    }
    if (settings.backward) parts.push('backward=1');
    return parts.join('&');
  }

  return { ENGINES: ENGINES, DTYPES: DTYPES, read: read, write: write };
})();
