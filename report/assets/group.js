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
    ["offset lag", formatNumber(summary.offset_lag)], ["time lag (s)", formatNumber(summary.time_lag_seconds)],
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
  // An empty chart says what it lacks instead of showing bare axes.
  const whenEmpty = (rows, text) => (rows.length ? {} : {
    title: { text, left: "center", top: "middle", textStyle: { color: "#59636e", fontWeight: "normal", fontSize: 13 } },
  });
  // Rebalances bunch up within seconds of a long history: both time charts zoom (wheel, or the slider).
  const zoom = [{ type: "inside", xAxisIndex: 0 }, { type: "slider", xAxisIndex: 0, height: 16, bottom: 8 }];

  const causes = [...new Set(series.rebalances.map((r) => r.cause))].sort();
  chart("chart-generations", {
    tooltip: { trigger: "item", formatter: (p) => p.seriesName === "generation"
      ? `generation ${p.value[1]}<br>${formatTime(p.value[0])}<br>${p.value[2]} member(s), ${p.value[3]}`
      : `rebalance to generation ${p.value[1]}: ${escapeHtml(p.seriesName)}<br>${formatTime(p.value[0])}<br>` +
        `${p.value[2]} moved (minimal ${p.value[3]}), members ${p.value[4]} → ${p.value[5]}` },
    legend: { top: 0, type: "scroll" },
    grid: { ...grid, bottom: 60 }, dataZoom: zoom, xAxis: timeAxis, yAxis: { type: "value", name: "generation", minInterval: 1 },
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
    ...whenEmpty(series.ownership, "No partition was assigned in any generation of this group."),
    tooltip: { trigger: "item", formatter: (p) => p.seriesName === "moves"
      ? `${escapeHtml(partitions[p.value[1]])} moved ${formatTime(p.value[0])}<br>${escapeHtml(p.value[2])} → ${escapeHtml(p.value[3])}${p.value[4] ? " (forced)" : ""}`
      : `${escapeHtml(partitions[p.value[2]])}: ${escapeHtml(p.value[3])}<br>${formatTime(p.value[0])} – ${p.value[4] ? formatTime(p.value[1]) : "now"}` },
    legend: { top: 0, data: ["moves"] },
    grid: { ...grid, left: 140, bottom: 60 }, xAxis: timeAxis,
    yAxis: { type: "category", data: partitions, inverse: true },
    dataZoom: zoom,
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

  document.getElementById("owners").innerHTML = members
    .map((m) => `<span class="owner"><span class="swatch" style="background:${colour[m]}"></span>${escapeHtml(m)}</span>`).join("");

  chart("chart-lag", {
    ...whenEmpty(series.lag, "No end-offset snapshot holds a committed offset of this group."),
    tooltip: { trigger: "axis" }, legend: { top: 0 }, grid, xAxis: timeAxis,
    yAxis: [{ type: "value", name: "offset lag" }, { type: "value", name: "time lag (s)" }],
    series: [
      { name: "offset lag", type: "line", symbolSize: 5, data: series.lag.map((l) => [l.observed_at_ms, l.offset_lag]) },
      { name: "time lag (s)", type: "line", yAxisIndex: 1, symbolSize: 5, connectNulls: false,
        data: series.lag.map((l) => [l.observed_at_ms, l.time_lag_seconds]) },
    ],
  });

  chart("chart-status", {
    ...whenEmpty(series.status, "No status window evaluated this group."),
    tooltip: { trigger: "axis" }, legend: { top: 0 }, grid, xAxis: timeAxis,
    yAxis: [{ type: "category", data: ["OK", "WARN", "ERR"], name: "status" }, { type: "value", name: "total lag" }],
    series: [
      { name: "status", type: "line", step: "end", symbolSize: 6, data: series.status.map((s) => [s.evaluated_at_ms, s.status]) },
      { name: "total lag", type: "bar", yAxisIndex: 1, barMaxWidth: 8, itemStyle: { opacity: 0.4 },
        data: series.status.map((s) => [s.evaluated_at_ms, s.total_lag]) },
    ],
  });

  const notComputed = (name) => {
    const body = document.querySelector(`#section-${name} .body`);
    body.dataset.state = "not-computed";
    body.innerHTML = `<p class="not-computed">Not computed: the warehouse holds no <code>${escapeHtml(name)}</code> (a nightly of a groupscope that builds it fills it).</p>`;
  };
  const optionalTable = (id, part, format) => {
    const more = part.total > part.rows.length ? `<caption>${part.rows.length} of ${part.total} rows shown</caption>` : "";
    document.getElementById(id).innerHTML = part.rows.length
      ? more + htmlTable(part.columns, part.rows, format)
      : "<tbody><tr><td>No row for this group.</td></tr></tbody>";
  };
  const timeColumns = (column, value) => (column.endsWith("_at_ms") ? formatTime(value) : value);

  if (data.optional.whatif_summary === null) notComputed("whatif_summary");
  else {
    document.querySelector("#section-whatif_summary .body").dataset.state = "computed";
    const whatif = records(data.optional.whatif_summary.whatif);
    const label = (w) => (w.is_actual_assignor ? `${w.assignor} (in use)` : w.assignor);
    chart("chart-whatif", {
      tooltip: { trigger: "axis" }, legend: { top: 0 }, grid,
      xAxis: { type: "category", data: whatif.map(label) }, yAxis: { type: "value", name: "partitions", minInterval: 1 },
      series: [
        { name: "moved", type: "bar", data: whatif.map((w) => w.moved_partition_count) },
        { name: "revoked", type: "bar", data: whatif.map((w) => w.revoked_partition_count) },
        { name: "unnecessary moves", type: "bar", data: whatif.map((w) => w.unnecessary_moves) },
      ],
    });
    optionalTable("whatif", data.optional.whatif_summary.whatif);
  }

  if (data.optional.generation_capacity === null) notComputed("generation_capacity");
  else {
    document.querySelector("#section-generation_capacity .body").dataset.state = "computed";
    const capacity = records(data.optional.generation_capacity.capacity);
    chart("chart-capacity", {
      tooltip: { trigger: "axis" }, legend: { top: 0 }, grid, xAxis: timeAxis,
      yAxis: [{ type: "value", name: "capacity used", min: 0, max: 1 }, { type: "value", name: "members", minInterval: 1 }],
      series: [
        { name: "capacity used", type: "line", step: "end", data: capacity.map((c) => [c.recorded_at_ms, c.capacity_used]) },
        { name: "idle members", type: "bar", yAxisIndex: 1, barMaxWidth: 8, data: capacity.map((c) => [c.recorded_at_ms, c.idle_member_count]) },
        { name: "members", type: "line", yAxisIndex: 1, step: "end", data: capacity.map((c) => [c.recorded_at_ms, c.member_count]) },
      ],
    });
    optionalTable("idle-members", data.optional.generation_capacity.idle_members, timeColumns);
  }
  document.body.dataset.ready = "true";
})();
