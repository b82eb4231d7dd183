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
    ["offset lag now", formatNumber(summary.current_offset_lag)],
    [`max offset lag, ${summary.last_day ?? "last day"}`, formatNumber(summary.last_day_max_offset_lag)],
    ["time lag now (s)", formatNumber(summary.current_time_lag_seconds)],
    [`max time lag, ${summary.last_day ?? "last day"} (s)`, formatNumber(summary.last_day_max_time_lag_seconds)],
    ["last seen (UTC)", formatTime(summary.last_seen_at_ms)],
  ];
  document.getElementById("summary").innerHTML =
    facts.map(([name, value]) => `<div><dt>${escapeHtml(name)}</dt><dd>${escapeHtml((value ?? "") === "" ? "–" : value)}</dd></div>`).join("");

  // Every time the page holds: the ownership bars still open end at the latest of them.
  const times = [
    ...series.generations.map((g) => g.recorded_at_ms), ...series.rebalances.map((r) => r.completed_at_ms),
    ...series.ownership.flatMap((o) => [o.assigned_at_ms, o.valid_until_at_ms]), ...series.lag.map((l) => l.observed_at_ms),
    ...series.status.map((s) => s.evaluated_at_ms),
  ].filter((t) => t !== null);
  const earliest = (values) => values.reduce((a, b) => Math.min(a, b), Infinity);
  const latest = (values) => values.reduce((a, b) => Math.max(a, b), -Infinity);
  const lastTime = times.length ? latest(times) : Date.now();
  const timeAxis = { type: "time", axisLabel: { hideOverlap: true } };
  const grid = { left: 60, right: 60, top: 40, bottom: 40 };

  // Each time chart opens on the span of its own events, padded by a twentieth: not on ECharts' rounded
  // extent (one point got a two-day axis) nor on the still-open ownership bars, which run to the page's
  // latest time (a nightly's lag snapshots come days after the last rebalance, squeezing the rebalances
  // into the axis's first tenth). A single instant opens a minute either side.
  const SINGLE_INSTANT_HALF_WINDOW_MS = 60_000;
  const openingWindow = (eventTimes) => {
    const known = eventTimes.filter((t) => t !== null && t !== undefined);
    if (!known.length) return null;
    const first = earliest(known), last = latest(known);
    const pad = first === last ? SINGLE_INSTANT_HALF_WINDOW_MS : (last - first) / 20;
    return [first - pad, last + pad];
  };
  const axisOver = (window) => (window ? { ...timeAxis, min: window[0], max: window[1] } : timeAxis);
  // Rebalances bunch up within seconds of a long history: these charts zoom (wheel, or the slider). The
  // axis spans the window and every time drawn (a zoom cannot open wider than its axis, which ECharts
  // would round out to days around a single point); the zoom opens on the window.
  const zoomedAxis = (window, drawnTimes, filterMode) => {
    const zooms = [{ type: "inside", xAxisIndex: 0, filterMode }, { type: "slider", xAxisIndex: 0, height: 16, bottom: 8, filterMode }];
    if (!window) return { xAxis: timeAxis, dataZoom: zooms };
    return {
      xAxis: { ...timeAxis, min: Math.min(window[0], earliest(drawnTimes)), max: Math.max(window[1], latest(drawnTimes)) },
      dataZoom: zooms.map((zoom) => ({ ...zoom, startValue: window[0], endValue: window[1] })),
    };
  };

  // A chart of no point says what it lacks instead of showing bare axes; a chart of one point says what
  // the point is, above the plot (a lone dot says nothing of itself). Returns the chart's title and grid.
  const wordStyle = { color: "#59636e", fontWeight: "normal", fontSize: 13 };
  const inWords = (count, none, one, gridChanges = {}) => {
    const plain = { ...grid, ...gridChanges };
    if (count === 0) return { title: { text: none, left: "center", top: "middle", textStyle: wordStyle }, grid: plain };
    if (one) return { title: { text: one, left: "center", top: 24, textStyle: wordStyle }, grid: { ...plain, top: 64 } };
    return { grid: plain };
  };

  const causes = [...new Set(series.rebalances.map((r) => r.cause))].sort();
  const generationCount = series.generations.length + series.rebalances.length;
  const onlyGeneration = series.generations[0];
  const generationWords = inWords(generationCount, "No generation recorded: the group only commits offsets.",
    generationCount === 1 && onlyGeneration
      ? `One generation and no rebalance: generation ${onlyGeneration.generation}, ${onlyGeneration.member_count} member(s), ` +
        `recorded ${formatTime(onlyGeneration.recorded_at_ms)} UTC.`
      : generationCount === 1 ? "One point: a rebalance with no generation recorded." : null, { bottom: 60 });
  const generationTimes = [...series.generations.map((g) => g.recorded_at_ms), ...series.rebalances.map((r) => r.completed_at_ms)];
  chart("chart-generations", {
    ...generationWords,
    tooltip: { trigger: "item", formatter: (p) => p.seriesName === "generation"
      ? `generation ${p.value[1]}<br>${formatTime(p.value[0])}<br>${p.value[2]} member(s), ${p.value[3]}`
      : `rebalance to generation ${p.value[1]}: ${escapeHtml(p.seriesName)}<br>${formatTime(p.value[0])}<br>` +
        `${p.value[2]} moved (minimal ${p.value[3]}), members ${p.value[4]} → ${p.value[5]}` },
    legend: { top: 0, type: "scroll" },
    ...zoomedAxis(openingWindow(generationTimes), generationTimes, "none"),
    yAxis: { type: "value", name: "generation", minInterval: 1 },
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
  const rebalanceColumns = ["completed (UTC)", "generation before → after", "cause", "causes", "partitions moved", "minimal moves (partitions)",
    "members before → after", "protocol", "estimated pause (ms)"];
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
  // The ownership's events: assignments, ends of ownership and moves; an open bar's end is not one.
  const ownershipEvents = [...series.ownership.flatMap((o) => [o.assigned_at_ms, o.valid_until_at_ms]),
    ...series.moves.map((m) => m.completed_at_ms)].filter((t) => t !== null);
  const ownershipInstants = new Set(ownershipEvents).size;
  const ownershipWords = inWords(series.ownership.length, "No partition was assigned in any generation of this group.",
    ownershipInstants === 1
      ? `Every partition was assigned at once, ${formatTime(ownershipEvents[0])} UTC, and none has changed owner since.` : null,
    { left: 140, bottom: 60 });
  // One instant of change: the window runs on to the page's latest time, so the bars it opened show.
  const ownershipWindow = openingWindow(ownershipInstants === 1 ? [ownershipEvents[0], lastTime] : ownershipEvents);
  chart("chart-ownership", {
    ...ownershipWords,
    tooltip: { trigger: "item", formatter: (p) => p.seriesName === "moves"
      ? `${escapeHtml(partitions[p.value[1]])} moved ${formatTime(p.value[0])}<br>${escapeHtml(p.value[2])} → ${escapeHtml(p.value[3])}${p.value[4] ? " (forced)" : ""}`
      : `${escapeHtml(partitions[p.value[2]])}: ${escapeHtml(p.value[3])}<br>${formatTime(p.value[0])} – ${p.value[4] ? formatTime(p.value[1]) : "now"}` },
    legend: { top: 0, data: ["moves"] },
    yAxis: { type: "category", data: partitions, inverse: true },
    // weakFilter: a bar that starts before the window and ends after it is drawn across it.
    ...zoomedAxis(ownershipWindow, [...ownershipEvents, lastTime], "weakFilter"),
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

  const onlySnapshot = series.lag.length === 1 ? series.lag[0] : null;
  const lagWords = inWords(series.lag.length, "No end-offset snapshot holds a committed offset of this group.",
    onlySnapshot && `One end-offset snapshot, ${formatTime(onlySnapshot.observed_at_ms)} UTC: offset lag ` +
      `${formatNumber(onlySnapshot.offset_lag)}, time lag ${onlySnapshot.time_lag_seconds === null ? "unknown" : `${formatNumber(onlySnapshot.time_lag_seconds)} s`}.`);
  chart("chart-lag", {
    ...lagWords,
    tooltip: { trigger: "axis" }, legend: { top: 0 }, 
    xAxis: axisOver(openingWindow(series.lag.map((l) => l.observed_at_ms))),
    yAxis: [{ type: "value", name: "offset lag (offsets)" }, { type: "value", name: "time lag (s)" }],
    series: [
      { name: "offset lag", type: "line", symbolSize: 5, data: series.lag.map((l) => [l.observed_at_ms, l.offset_lag]) },
      { name: "time lag (s)", type: "line", yAxisIndex: 1, symbolSize: 5, connectNulls: false,
        data: series.lag.map((l) => [l.observed_at_ms, l.time_lag_seconds]) },
    ],
  });

  const onlyWindow = series.status.length === 1 ? series.status[0] : null;
  const statusWords = inWords(series.status.length, "No status window evaluated this group.",
    onlyWindow && `One evaluation window, ending ${formatTime(onlyWindow.evaluated_at_ms)} UTC: status ${onlyWindow.status}, ` +
      `total lag ${formatNumber(onlyWindow.total_lag)}.`);
  chart("chart-status", {
    ...statusWords,
    tooltip: { trigger: "axis" }, legend: { top: 0 }, 
    xAxis: axisOver(openingWindow(series.status.map((s) => s.evaluated_at_ms))),
    yAxis: [{ type: "category", data: ["OK", "WARN", "ERR"], name: "status" }, { type: "value", name: "total lag (offsets)" }],
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
  // A table of an optional section shows the columns its spec names, [column, header with its unit, format].
  const optionalTable = (id, part, spec) => {
    const more = part.total > part.rows.length ? `<caption>${part.rows.length} of ${part.total} rows shown</caption>` : "";
    const position = Object.fromEntries(part.columns.map((c, i) => [c, i]));
    const rows = part.rows.map((row) => spec.map(([column, , format]) => (format ?? formatNumber)(row[position[column]])));
    document.getElementById(id).innerHTML = part.rows.length
      ? more + htmlTable(spec.map(([, header]) => header), rows)
      : "<tbody><tr><td>No row for this group.</td></tr></tbody>";
  };
  const asText = (value) => value ?? "";
  const yesOrNo = (value) => (value ? "yes" : "no");
  const whatifColumns = [
    ["assignor", "assignor", asText], ["is_actual_assignor", "used by the group", yesOrNo],
    ["rebalance_count", "rebalances replayed"], ["moved_partition_count", "partitions moved"],
    ["unnecessary_moves", "moves beyond the minimum (partitions)"], ["revoked_partition_count", "partitions revoked"],
    ["average_stickiness", "average stickiness (minimal ÷ moved, 1 = none needless)"],
    ["max_skew", "largest skew (partitions, most − fewest per member)"], ["max_idle_member_count", "most idle members"],
    ["estimated_pause_ms", "estimated pause, summed (ms)"], ["same_as_actual_count", "replays equal to the records (rebalances)"],
  ];
  const idleColumns = [
    ["recorded_at_ms", "generation recorded (UTC)", formatTime], ["generation", "generation", asText],
    ["member_key", "member (instance id, else member id)", asText], ["client_id", "client id", asText],
    ["client_host", "client host", asText], ["subscribed_topics", "subscribed topics", asText],
    ["reason", "why it owned nothing", asText], ["idle_since_at_ms", "group has had idle members since (UTC)", formatTime],
  ];

  if (data.optional.whatif_summary === null) notComputed("whatif_summary");
  else {
    document.querySelector("#section-whatif_summary .body").dataset.state = "computed";
    const whatif = records(data.optional.whatif_summary.whatif);
    const label = (w) => (w.is_actual_assignor ? `${w.assignor} (in use)` : w.assignor);
    chart("chart-whatif", {
      ...inWords(whatif.length, "No rebalance of this group was replayed in the last 30 days.", null),
      tooltip: { trigger: "axis" }, legend: { top: 0 },
      xAxis: { type: "category", data: whatif.map(label) }, yAxis: { type: "value", name: "partitions", minInterval: 1 },
      series: [
        { name: "moved", type: "bar", data: whatif.map((w) => w.moved_partition_count) },
        { name: "revoked", type: "bar", data: whatif.map((w) => w.revoked_partition_count) },
        { name: "unnecessary moves", type: "bar", data: whatif.map((w) => w.unnecessary_moves) },
      ],
    });
    optionalTable("whatif", data.optional.whatif_summary.whatif, whatifColumns);
  }

  if (data.optional.generation_capacity === null) notComputed("generation_capacity");
  else {
    document.querySelector("#section-generation_capacity .body").dataset.state = "computed";
    const capacity = records(data.optional.generation_capacity.capacity);
    const onlyCapacity = capacity.length === 1 ? capacity[0] : null;
    const capacityWords = inWords(capacity.length, "No generation of this group had members.",
      onlyCapacity && `One generation with members, ${onlyCapacity.generation} at ${formatTime(onlyCapacity.recorded_at_ms)} UTC: ` +
        `${onlyCapacity.member_count} member(s), ${onlyCapacity.idle_member_count} owning nothing.`);
    chart("chart-capacity", {
      ...capacityWords,
      tooltip: { trigger: "axis" }, legend: { top: 0 }, 
      xAxis: axisOver(openingWindow(capacity.map((c) => c.recorded_at_ms))),
      yAxis: [{ type: "value", name: "capacity used (share)", min: 0, max: 1 }, { type: "value", name: "members", minInterval: 1 }],
      series: [
        { name: "capacity used", type: "line", step: "end", data: capacity.map((c) => [c.recorded_at_ms, c.capacity_used]) },
        { name: "idle members", type: "bar", yAxisIndex: 1, barMaxWidth: 8, data: capacity.map((c) => [c.recorded_at_ms, c.idle_member_count]) },
        { name: "members", type: "line", yAxisIndex: 1, step: "end", data: capacity.map((c) => [c.recorded_at_ms, c.member_count]) },
      ],
    });
    optionalTable("idle-members", data.optional.generation_capacity.idle_members, idleColumns);
  }
  document.body.dataset.ready = "true";
})();
