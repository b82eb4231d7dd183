// One group's page: generations and rebalances, partition ownership, lag, status, and the what-if and
// idle-member tables when the warehouse holds them.
"use strict";
(() => {
  const { data, escapeHtml, formatTime, formatNumber, records, chart, htmlTable } = groupscope;
  const summary = data.summary;
  const series = Object.fromEntries(Object.entries(data.series).map(([name, table]) => [name, records(table)]));
  document.getElementById("group-title").textContent = `${summary.group_id} (cluster ${data.cluster})`;
  const facts = [
    ["health", summary.health], ["status", summary.status], ["protocol", summary.group_protocol],
    ["state", summary.state], ["members", summary.member_count], ["generation", summary.generation],
    ["rebalances", summary.rebalance_count], ["rebalances / day", summary.rebalances_per_day],
    ["offset lag", formatNumber(summary.offset_lag)], ["time lag (s)", summary.time_lag_seconds],
    ["last seen (UTC)", formatTime(summary.last_seen_at_ms)],
  ];
  document.getElementById("summary").innerHTML =
    facts.map(([name, value]) => `<div><dt>${name}</dt><dd>${escapeHtml(value ?? "–")}</dd></div>`).join("");

  // Every time the page holds: the ownership bars still open end at the latest of them.
  const times = [
    ...series.generations.map((g) => g.recorded_at_ms), ...series.rebalances.map((r) => r.completed_at_ms),
    ...series.ownership.flatMap((o) => [o.assigned_at_ms, o.valid_until_at_ms]), ...series.lag.map((l) => l.observed_at_ms),
    ...series.status.map((s) => s.evaluated_at_ms),
  ].filter((t) => t !== null);
  const lastTime = times.length ? Math.max(...times) : Date.now();
  const timeAxis = { type: "time", axisLabel: { hideOverlap: true } };
  const grid = { left: 60, right: 60, top: 40, bottom: 40 };

  const causes = [...new Set(series.rebalances.map((r) => r.cause))].sort();
  chart("chart-generations", {
    tooltip: { trigger: "item", formatter: (p) => p.seriesName === "generation"
      ? `generation ${p.value[1]}<br>${formatTime(p.value[0])}<br>${p.value[2]} member(s), ${p.value[3]}`
      : `rebalance to generation ${p.value[1]}: ${escapeHtml(p.seriesName)}<br>${formatTime(p.value[0])}<br>` +
        `${p.value[2]} moved (minimal ${p.value[3]}), members ${p.value[4]} → ${p.value[5]}` },
    legend: { top: 0, type: "scroll" },
    grid, xAxis: timeAxis, yAxis: { type: "value", name: "generation", minInterval: 1 },
    series: [
      { name: "generation", type: "line", step: "end", symbolSize: 5,
        data: series.generations.map((g) => [g.recorded_at_ms, g.generation, g.member_count, g.state]) },
      ...causes.map((cause) => ({
        name: cause, type: "scatter", symbolSize: 12,
        data: series.rebalances.filter((r) => r.cause === cause).map((r) =>
          [r.completed_at_ms, r.generation, r.moved_partition_count, r.minimal_moves, r.member_count_before, r.member_count_after]),
      })),
    ],
  });
  const rebalanceColumns = ["completed (UTC)", "generation", "cause", "causes", "moved", "minimal moves", "members", "protocol", "pause (ms)"];
  document.getElementById("rebalances").innerHTML = series.rebalances.length
    ? htmlTable(rebalanceColumns, series.rebalances.map((r) => [formatTime(r.completed_at_ms), `${r.previous_generation ?? "–"} → ${r.generation}`,
        r.cause, r.causes, r.moved_partition_count, r.minimal_moves, `${r.member_count_before} → ${r.member_count_after}`,
        r.rebalance_protocol, r.estimated_pause_ms ?? ""]))
    : "<tbody><tr><td>No rebalance recorded.</td></tr></tbody>";

  const partitions = [...new Set([...series.ownership.map((o) => o.topic_partition), ...series.moves.map((m) => m.topic_partition)])]
    .sort((a, b) => a.localeCompare(b, "en", { numeric: true }));
  const row = Object.fromEntries(partitions.map((p, i) => [p, i]));
  const members = [...new Set(series.ownership.map((o) => o.member_key))].sort();
  const palette = ["#4c78a8", "#f58518", "#54a24b", "#b279a2", "#72b7b2", "#eeca3b", "#9d755d", "#bab0ac", "#ff9da6", "#79706e"];
  const colour = Object.fromEntries(members.map((m, i) => [m, palette[i % palette.length]]));
  chart("chart-ownership", {
    tooltip: { trigger: "item", formatter: (p) => p.seriesName === "moves"
      ? `${escapeHtml(partitions[p.value[1]])} moved ${formatTime(p.value[0])}<br>${escapeHtml(p.value[2])} → ${escapeHtml(p.value[3])}${p.value[4] ? " (forced)" : ""}`
      : `${escapeHtml(partitions[p.value[2]])}: ${escapeHtml(p.value[3])}<br>${formatTime(p.value[0])} – ${p.value[4] ? formatTime(p.value[1]) : "now"}` },
    legend: { top: 0, data: ["moves"] },
    grid: { ...grid, left: 140 }, xAxis: timeAxis,
    yAxis: { type: "category", data: partitions, inverse: true },
    dataZoom: [{ type: "inside", xAxisIndex: 0 }],
    series: [
      { name: "ownership", type: "custom", encode: { x: [0, 1], y: 2 },
        renderItem: (params, api) => {
          const start = api.coord([api.value(0), api.value(2)]), end = api.coord([api.value(1), api.value(2)]);
          const height = api.size([0, 1])[1] * 0.6;
          const shape = echarts.graphic.clipRectByRect(
            { x: start[0], y: start[1] - height / 2, width: Math.max(end[0] - start[0], 1), height },
            { x: params.coordSys.x, y: params.coordSys.y, width: params.coordSys.width, height: params.coordSys.height });
          return shape && { type: "rect", shape, style: api.style() };
        },
        data: series.ownership.map((o) => ({
          value: [o.assigned_at_ms, o.valid_until_at_ms ?? lastTime, row[o.topic_partition], o.member_key, o.valid_until_at_ms !== null],
          itemStyle: { color: colour[o.member_key] },
        })) },
      { name: "moves", type: "scatter", symbol: "diamond", symbolSize: 11, itemStyle: { color: "#cf222e" }, z: 5,
        data: series.moves.map((m) => [m.completed_at_ms, row[m.topic_partition], m.from_member_key, m.to_member_key, m.is_forced]) },
    ],
  });

  chart("chart-lag", {
    tooltip: { trigger: "axis" }, legend: { top: 0 }, grid, xAxis: timeAxis,
    yAxis: [{ type: "value", name: "offset lag" }, { type: "value", name: "time lag (s)" }],
    series: [
      { name: "offset lag", type: "line", symbolSize: 5, data: series.lag.map((l) => [l.observed_at_ms, l.offset_lag]) },
      { name: "time lag (s)", type: "line", yAxisIndex: 1, symbolSize: 5, connectNulls: false,
        data: series.lag.map((l) => [l.observed_at_ms, l.time_lag_seconds]) },
    ],
  });

  chart("chart-status", {
    tooltip: { trigger: "axis" }, legend: { top: 0 }, grid, xAxis: timeAxis,
    yAxis: [{ type: "category", data: ["OK", "WARN", "ERR"], name: "status" }, { type: "value", name: "total lag" }],
    series: [
      { name: "status", type: "line", step: "end", symbolSize: 6, data: series.status.map((s) => [s.evaluated_at_ms, s.status]) },
      { name: "total lag", type: "bar", yAxisIndex: 1, barMaxWidth: 8, itemStyle: { opacity: 0.4 },
        data: series.status.map((s) => [s.evaluated_at_ms, s.total_lag]) },
    ],
  });

  for (const [name, table] of Object.entries(data.optional)) {
    const body = document.querySelector(`#section-${name} .body`);
    if (table === null) {
      body.dataset.state = "not-computed";
      body.innerHTML = `<p class="not-computed">Not computed: the warehouse holds no <code>${escapeHtml(name)}</code> table yet (a nightly of a groupscope that builds it fills it).</p>`;
      continue;
    }
    body.dataset.state = "computed";
    const more = table.total > table.rows.length ? `<p class="note">${table.rows.length} of ${table.total} rows shown.</p>` : "";
    body.innerHTML = table.rows.length
      ? `<table class="rows">${htmlTable(table.columns, table.rows)}</table>${more}`
      : `<p class="note">No row for this group.</p>`;
  }
  document.body.dataset.ready = "true";
})();
