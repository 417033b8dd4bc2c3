"""The style sheet and the table sorter inlined into report.html (no file or network fetch when it opens).

Python strings rather than package data files, so that an installed wheel carries them as it carries code.
"""

STYLE = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: #1d232b; }
nav { position: sticky; top: 0; background: #f4f6f8; border-bottom: 1px solid #d0d7de; padding: 4px 16px;
      z-index: 2; }
nav ul { list-style: none; margin: 0; padding: 0; display: flex; flex-wrap: wrap; gap: 4px 14px; }
main { padding: 8px 24px 40px; max-width: 100%; }
h1, h2, h3 { scroll-margin-top: 72px; }
h2 { border-bottom: 1px solid #d0d7de; padding-bottom: 4px; margin-top: 32px; }
code { background: #eef1f4; padding: 0 3px; border-radius: 3px; }
.scroll { overflow-x: auto; margin: 8px 0; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border: 1px solid #d0d7de; padding: 3px 7px; text-align: left; vertical-align: top; }
th { background: #f4f6f8; cursor: pointer; user-select: none; white-space: nowrap; }
th:hover, th:focus { background: #e3e8ee; }
th[aria-sort="ascending"]::after { content: " \\25B2"; }
th[aria-sort="descending"]::after { content: " \\25BC"; }
tbody tr:nth-child(even) { background: #fafbfc; }
figure { display: inline-block; margin: 6px 10px 6px 0; vertical-align: top; }
figure.plot img { max-width: min(100%, 1100px); }
figure.picture img { max-width: 360px; max-height: 360px; min-width: 96px; }
figcaption { font-size: 12px; }
"""

# Click (or Enter on) a header: sort the rows by that column, again to reverse. Numbers sort as numbers
# (the cell's leading number: "92 (noisy)", "3533x vs cpu ...", "1e-06"), before text; "missing" and
# empty cells stay last in both directions. The header states its order in aria-sort.
SORT_TABLES = r"""
(function () {
  "use strict";
  var NUMBER = /^[-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?/i;
  function key(text) {
    var t = text.trim();
    var m = NUMBER.exec(t);
    if (m) { return [0, parseFloat(m[0]), t]; }
    if (/^[-+]?inf/.test(t)) { return [0, t.charAt(0) === "-" ? -Infinity : Infinity, t]; }
    if (t === "" || t === "missing") { return [2, 0, t]; }
    return [1, 0, t.toLowerCase()];
  }
  function order(a, b) {
    if (a[0] === 0 && a[1] !== b[1]) { return a[1] < b[1] ? -1 : 1; }
    return a[2] < b[2] ? -1 : (a[2] > b[2] ? 1 : 0);
  }
  function sortBy(table, heads, th, column) {
    var ascending = th.getAttribute("aria-sort") !== "ascending";
    Array.prototype.forEach.call(heads, function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows).map(function (row) {
      return [key(row.cells[column] ? row.cells[column].textContent : ""), row];
    });
    rows.sort(function (x, y) {
      if (x[0][0] !== y[0][0]) { return x[0][0] - y[0][0]; }
      return ascending ? order(x[0], y[0]) : order(y[0], x[0]);
    });
    rows.forEach(function (pair) { body.appendChild(pair[1]); });
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    var heads = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(heads, function (th, column) {
      th.tabIndex = 0;
      th.title = "sort by " + th.textContent;
      th.addEventListener("click", function () { sortBy(table, heads, th, column); });
      th.addEventListener("keydown", function (e) { if (e.key === "Enter") { sortBy(table, heads, th, column); } });
    });
  });
})();
"""
