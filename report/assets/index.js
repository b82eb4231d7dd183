// The index: every group in one table, filtered and sorted in the browser, and two charts of the estate.
// Only the first rows of the filtered, sorted list are drawn (more on request): sorting 2,000 groups'
// values takes a millisecond, drawing 2,000 rows a third of a second (bench/report_index.py).
"use strict";
(() => {
  const { data, escapeHtml, formatTime, formatNumber, chart } = groupscope;
  const column = Object.fromEntries(data.columns.map((name, i) => [name, i]));
  // [column, header, kind, what the header means when it is not plain]. A day's largest lag and the lag
  // now differ (29 offsets behind in the morning, 0 at the last snapshot): both are shown, each named.
  const shown = [
    ["group_id", "group", "text"], ["health", "health", "text"], ["status", "status", "text"],
    ["group_protocol", "protocol", "text"], ["state", "state", "text"], ["member_count", "members", "num"],
    ["rebalances_per_day", "rebalances / day", "num"], ["rebalance_count", "rebalances", "num"],
    ["current_offset_lag", "offset lag now", "num",
      "Offsets behind, summed over the group's partitions, at the cluster's latest end-offset snapshot (as group_health)"],
    ["last_day_max_offset_lag", "max offset lag, last day", "num",
      "The largest offset lag of the group's last day in group_daily (UTC; the run's day unless the group was deleted)"],
    ["current_time_lag_seconds", "time lag now (s)", "num",
      "Seconds behind, the group's largest partition, at the cluster's latest end-offset snapshot"],
    ["last_day_max_time_lag_seconds", "max time lag, last day (s)", "num", "The largest time lag of the group's last day in group_daily"],
    ["last_seen_at_ms", "last seen (UTC)", "time"],
  ];
  const lastDay = data.groups.map((row) => row[column.last_day]).filter((day) => day).sort().pop();
  document.getElementById("generated").textContent =
    `cluster ${data.cluster}: ${data.groups.length.toLocaleString("en")} groups, generated ${data.generated_at}` +
    (lastDay ? `; last day ${lastDay} (UTC)` : "");

  const cell = (row, [name, , kind]) => {
    const value = row[column[name]];
    if (name === "group_id") return `<td><a href="${escapeHtml(row[column.page])}">${escapeHtml(value)}</a></td>`;
    if (name === "health") return `<td><span class="health health-${escapeHtml(value)}">${escapeHtml(value)}</span></td>`;
    if (kind === "time") return `<td>${formatTime(value)}</td>`;
    if (kind === "num") return `<td class="num">${formatNumber(value)}</td>`;
    return `<td>${escapeHtml(value)}</td>`;
  };
  const head = document.querySelector("#groups thead tr");
  head.innerHTML = shown.map(([name, label, kind, meaning]) =>
    `<th data-column="${name}" class="${kind}"${meaning ? ` title="${escapeHtml(meaning)}"` : ""}>${label}</th>`).join("");

  const filters = { text: "", health: "", status: "", group_protocol: "" };
  let sort = { name: "group_id", descending: false };
  const ROWS_PER_STEP = 200;
  let matching = [], drawn = 0;
  const compare = (a, b) => {
    const x = a[column[sort.name]], y = b[column[sort.name]];
    if (x === y) return 0;
    if (x === null || x === undefined) return 1; // missing values last, whichever the direction
    if (y === null || y === undefined) return -1;
    const order = typeof x === "number" ? x - y : String(x).localeCompare(String(y));
    return sort.descending ? -order : order;
  };
  const drawMore = () => {
    const next = matching.slice(drawn, drawn + ROWS_PER_STEP);
    document.querySelector("#groups tbody").insertAdjacentHTML("beforeend",
      next.map((row) => `<tr>${shown.map((spec) => cell(row, spec)).join("")}</tr>`).join(""));
    drawn += next.length;
    document.getElementById("shown-count").textContent =
      `${matching.length.toLocaleString("en")} shown` + (drawn < matching.length ? ` (first ${drawn.toLocaleString("en")} drawn)` : "");
    document.getElementById("more").hidden = drawn >= matching.length;
  };
  const render = () => {
    const text = filters.text.toLowerCase();
    matching = data.groups.filter((row) =>
      (!text || String(row[column.group_id]).toLowerCase().includes(text)) &&
      ["health", "status", "group_protocol"].every((name) => !filters[name] || row[column[name]] === filters[name]));
    matching.sort(compare);
    document.querySelector("#groups tbody").innerHTML = "";
    drawn = 0;
    drawMore();
    for (const th of head.children) {
      th.setAttribute("aria-sort", th.dataset.column === sort.name ? (sort.descending ? "descending" : "ascending") : "none");
    }
  };
  document.getElementById("more").addEventListener("click", drawMore);
  head.addEventListener("click", (event) => {
    const name = event.target.dataset.column;
    if (!name) return;
    sort = { name, descending: sort.name === name ? !sort.descending : false };
    render();
  });
  for (const [id, name] of [["filter-health", "health"], ["filter-status", "status"], ["filter-protocol", "group_protocol"]]) {
    const select = document.getElementById(id);
    const values = [...new Set(data.groups.map((row) => row[column[name]]).filter((v) => v !== null))].sort();
    select.insertAdjacentHTML("beforeend", values.map((v) => `<option>${escapeHtml(v)}</option>`).join(""));
    select.addEventListener("change", () => { filters[name] = select.value; render(); });
  }
  document.getElementById("filter-text").addEventListener("input", (event) => { filters.text = event.target.value; render(); });
  render();

  // One bar or none is said in words: a lone bar filling the chart reads as a trend.
  const estateWords = data.days.length > 1 ? "" : data.days.length === 0 ? "No day in group_daily."
    : `One day, ${data.days[0].day}: ${formatNumber(data.days[0].rebalance_count)} rebalance(s) in ` +
      `${formatNumber(data.days[0].rebalancing_group_count)} group(s).`;
  chart("chart-estate-rebalances", {
    title: { text: "Rebalances per day, every group", subtext: estateWords, textStyle: { fontSize: 13 },
      subtextStyle: { color: "#59636e", fontSize: 13 } },
    tooltip: { trigger: "axis" },
    grid: { left: 50, right: 20, top: estateWords ? 60 : 40, bottom: 30 },
    xAxis: { type: "category", data: data.days.map((d) => d.day) },
    yAxis: { type: "value", minInterval: 1 },
    series: [{ name: "rebalances", type: "bar", data: data.days.map((d) => d.rebalance_count) }],
  });
  const healthCounts = {};
  for (const row of data.groups) healthCounts[row[column.health]] = (healthCounts[row[column.health]] || 0) + 1;
  const healthColours = { ok: "#2da44e", warning: "#d4a72c", critical: "#cf222e", deleted: "#8c959f" };
  chart("chart-health", {
    title: { text: "Groups by health", textStyle: { fontSize: 13 } },
    tooltip: { trigger: "item" },
    series: [{
      name: "groups", type: "pie", radius: ["30%", "55%"], top: 20,
      label: { show: true, formatter: "{b}: {c}" },
      data: Object.entries(healthCounts).map(([name, value]) => ({ name, value, itemStyle: { color: healthColours[name] } })),
    }],
  });
  document.body.dataset.readyMs = Math.round(performance.now()); // bench/report_index.py reads it
  document.body.dataset.ready = "true";
})();
