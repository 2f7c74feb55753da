#pragma once
// The page's data (docs/report.md, "The page's data"): the trace's numbers that the plan keeps, as the
// JSON that report.js draws from. Only pages/report/ includes this.

#include <string>

#include "render/pages/report/plan.hpp"
#include "render/pages/report/report.hpp"

namespace attn::report_detail {

std::string page_data(const Trace& trace, const ReportOptions& options, const ReportPlan& plan);

}  // namespace attn::report_detail
