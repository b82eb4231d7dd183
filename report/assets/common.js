// Shared by the index and the group pages: the page's inline data, formatting, tables.
"use strict";
const groupscope = (() => {
  const data = JSON.parse(document.getElementById("report-data").textContent);
  const escapeHtml = (value) => String(value ?? "").replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
  const two = (n) => String(n).padStart(2, "0");
  // Every time in the data is epoch milliseconds; shown in UTC, as the tables hold them.
  const formatTime = (ms) => {
    if (ms === null || ms === undefined) return "";
    const d = new Date(ms);
    return `${d.getUTCFullYear()}-${two(d.getUTCMonth() + 1)}-${two(d.getUTCDate())} ${two(d.getUTCHours())}:${two(d.getUTCMinutes())}:${two(d.getUTCSeconds())}`;
  };
  const formatNumber = (value) => (value === null || value === undefined ? "" : Number(value).toLocaleString("en"));
  const records = (table) => table.rows.map((row) => Object.fromEntries(table.columns.map((c, i) => [c, row[i]])));
  const chart = (id, option) => {
    const instance = echarts.init(document.getElementById(id), null, { renderer: "canvas" });
    instance.setOption({ animation: false, useUTC: true, ...option });
    window.addEventListener("resize", () => instance.resize());
    return instance;
  };
  const htmlTable = (columns, rows, format) =>
    `<thead><tr>${columns.map((c) => `<th>${escapeHtml(c)}</th>`).join("")}</tr></thead><tbody>` +
    rows.map((row) => `<tr>${row.map((v, i) => `<td>${escapeHtml(format ? format(columns[i], v) : v)}</td>`).join("")}</tr>`).join("") +
    "</tbody>";
  return { data, escapeHtml, formatTime, formatNumber, records, chart, htmlTable };
})();
