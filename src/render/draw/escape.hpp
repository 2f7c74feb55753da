#pragma once
// Text from a file made safe inside markup and inside a page's JSON. One escape for XML and HTML: the
// SVG figure (pages/svg.cpp) and the HTML report (pages/report/) both write through it.

#include <string>
#include <string_view>

namespace attn {

// `text` safe inside HTML text and attribute values: & < > " ' as character references (' as &#39;).
std::string html_escape(std::string_view text);

// `text` (already made visible, draw/visible.hpp) as XML character data or an attribute value: & < > " '
// as character references (' as &apos;). visible() leaves only characters that XML 1.0 allows, except
// the noncharacters U+FFFE and U+FFFF (EF BF BE, EF BF BF), which are written out here, \ufffe and
// \uffff, the way visible() writes the others.
std::string xml_escape(std::string_view text);

// `text` as a JSON string literal that is also safe inside <script>: besides JSON's own escapes, every
// `<` is written \u003c, so no `</script>` or `<!--` can appear in the page's data.
std::string json_string(std::string_view text);

}  // namespace attn
