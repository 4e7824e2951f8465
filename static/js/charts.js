/* Charts of the run, compare and report pages, from the JSON in #chart-data
 * (json_script): [{slug, bars: [...], lines: [...]}], one entry per test group.
 *
 * bars:  {title, axis, unit, categories: [test title], datasets: [{label,
 *         values, low, high, marks}]} -> horizontal bars, one category per
 *         test with its full title, one colour per run, whiskers low..high
 *         and each bar's mark against the reference (▲ ▼ = ≈ ?) at its end.
 * lines: {title, axis, series: [{label, points: [{x, y, low, high}]}]}
 *         -> queue-depth curves as fio-plot draws them: depth on a log2 axis
 *         in numeric order, one line per run with its 95% band.
 * A group's charts are drawn when its <details> is open (the first time).
 * Every number is also in the group's table, which the canvas points to.
 * A large comparison's tables are not in the page: each .table-slot
 * [data-src] is a link to its table's page, fetched and put in its place
 * when its <details> is opened.
 */
(function () {
  "use strict";
  const palette = ["#0b5cad", "#d9480f", "#2b8a3e", "#862e9c", "#e67700", "#1098ad",
                   "#c2255c", "#495057", "#5c940d", "#364fc7", "#a61e4d", "#087f5b"];
  const fmt = new Intl.NumberFormat("en", { maximumSignificantDigits: 4 });

  function wrap(text, width) {
    const words = String(text).split(" ");
    const lines = [];
    let line = "";
    words.forEach((w) => {
      if (line && (line + " " + w).length > width) { lines.push(line); line = w; }
      else { line = line ? line + " " + w : w; }
    });
    if (line) lines.push(line);
    return lines;
  }

  // Whiskers and marks for horizontal bars.
  const whiskers = {
    id: "whiskers",
    afterDatasetsDraw(chart) {
      const ctx = chart.ctx;
      const x = chart.scales.x;
      chart.data.datasets.forEach((ds, di) => {
        const meta = chart.getDatasetMeta(di);
        if (meta.hidden) return;
        meta.data.forEach((bar, i) => {
          const low = ds.low[i], high = ds.high[i];
          const cap = Math.min(5, bar.height / 3);
          ctx.save();
          ctx.strokeStyle = "#212529";
          ctx.lineWidth = 1.3;
          let end = bar.x;
          if (low !== null && high !== null) {
            const a = x.getPixelForValue(low), b = x.getPixelForValue(high);
            ctx.beginPath();
            ctx.moveTo(a, bar.y); ctx.lineTo(b, bar.y);
            ctx.moveTo(a, bar.y - cap); ctx.lineTo(a, bar.y + cap);
            ctx.moveTo(b, bar.y - cap); ctx.lineTo(b, bar.y + cap);
            ctx.stroke();
            end = Math.max(end, b);
          }
          const mark = (ds.marks[i] || "").split(" ")[0];
          if (mark && mark !== "reference") {
            ctx.fillStyle = mark === "▲" ? "#2b8a3e" : mark === "▼" ? "#c92a2a" : "#495057";
            ctx.font = "bold 12px system-ui, sans-serif";
            ctx.textBaseline = "middle";
            ctx.fillText(mark, end + 4, bar.y);
          }
          ctx.restore();
        });
      });
    },
  };

  function figure(container, title, describedBy) {
    const fig = document.createElement("figure");
    fig.className = "chart";
    const caption = document.createElement("figcaption");
    caption.textContent = title;
    const box = document.createElement("div");
    box.className = "canvas-box";
    const canvas = document.createElement("canvas");
    canvas.setAttribute("role", "img");
    canvas.setAttribute("aria-label", title + ". The values are in the table below.");
    if (describedBy) canvas.setAttribute("aria-describedby", describedBy);
    canvas.textContent = title + ": see the table below.";
    box.appendChild(canvas);
    fig.appendChild(caption);
    fig.appendChild(box);
    container.appendChild(fig);
    return { canvas, box };
  }

  function barChart(container, chart, tableId) {
    const { canvas, box } = figure(container, chart.title, tableId);
    const narrow = container.clientWidth < 600;
    const bars = chart.categories.length * Math.max(1, chart.datasets.length);
    // Room for every bar, the axis and a legend line per run or two.
    const legend = chart.datasets.length > 1
      ? Math.ceil(chart.datasets.length / (narrow ? 1 : 2)) * 22 : 0;
    const labelLines = chart.categories.reduce((n, c) => n + wrap(c, narrow ? 18 : 32).length, 0);
    box.style.height = Math.max(120, bars * 24, labelLines * 16) + legend + 70 + "px";
    let top = 0;
    chart.datasets.forEach((ds) => ds.values.forEach((v, i) => {
      top = Math.max(top, v || 0, ds.high[i] || 0);
    }));
    new Chart(canvas, {
      type: "bar",
      data: {
        labels: chart.categories.map((c) => wrap(c, narrow ? 18 : 32)),
        datasets: chart.datasets.map((ds, i) => ({
          label: ds.label,
          data: ds.values,
          low: ds.low,
          high: ds.high,
          marks: ds.marks,
          backgroundColor: palette[i % palette.length],
          barPercentage: 0.9,
          categoryPercentage: 0.85,
        })),
      },
      options: {
        indexAxis: "y",
        maintainAspectRatio: false,
        animation: false,
        plugins: {
          legend: { display: chart.datasets.length > 1, position: "top", align: "start" },
          tooltip: {
            callbacks: {
              label(item) {
                const ds = item.dataset, i = item.dataIndex;
                let text = `${ds.label}: ${fmt.format(item.raw)} ${chart.unit}`;
                if (ds.low[i] !== null && ds.high[i] !== null) {
                  text += ` (95%: ${fmt.format(ds.low[i])}–${fmt.format(ds.high[i])})`;
                }
                if (ds.marks[i]) text += ` ${ds.marks[i]}`;
                return text;
              },
            },
          },
        },
        scales: {
          x: { beginAtZero: true, suggestedMax: top * 1.08,
               title: { display: true, text: chart.axis } },
          y: { ticks: { autoSkip: false, font: { size: narrow ? 10 : 12 } } },
        },
      },
      plugins: [whiskers],
    });
  }

  function lineChart(container, chart, tableId) {
    const { canvas, box } = figure(container, chart.title, tableId);
    box.style.height = "300px";
    const depths = [...new Set(chart.series.flatMap((s) => s.points.map((p) => p.x)))]
      .sort((a, b) => a - b);
    const datasets = [];
    chart.series.forEach((s, i) => {
      const colour = palette[i % palette.length];
      const at = (key) => depths.map((d) => {
        const p = s.points.find((q) => q.x === d);
        return p ? p[key] : null;
      });
      datasets.push({ label: s.label, data: at("y"), borderColor: colour,
                      backgroundColor: colour, tension: 0, spanGaps: true });
      datasets.push({ label: "band-high", data: at("high"), borderWidth: 0,
                      pointRadius: 0, fill: false, spanGaps: true });
      datasets.push({ label: "band-low", data: at("low"), borderWidth: 0,
                      pointRadius: 0, fill: "-1", backgroundColor: colour + "33",
                      spanGaps: true });
    });
    new Chart(canvas, {
      type: "line",
      data: { labels: depths.map(String), datasets },
      options: {
        maintainAspectRatio: false,
        animation: false,
        plugins: {
          legend: { labels: { filter: (item) => !item.text.startsWith("band-") } },
          tooltip: { filter: (item) => !item.dataset.label.startsWith("band-") },
        },
        scales: {
          // Depths are powers of two, evenly spaced: a log2 axis.
          x: { title: { display: true, text: "Queue depth (log₂ scale)" } },
          y: { beginAtZero: true, title: { display: true, text: chart.axis } },
        },
      },
    });
  }

  function drawGroup(group) {
    const container = document.querySelector(`[data-group="${CSS.escape(group.slug)}"]`);
    if (!container || container.dataset.drawn) return;
    container.dataset.drawn = "1";
    const tableId = group.slug + "-table";
    (group.bars || []).forEach((chart) => barChart(container, chart, tableId));
    (group.lines || []).forEach((chart) => lineChart(container, chart, tableId));
  }

  function charts() {
    const source = document.getElementById("chart-data");
    if (!source || typeof Chart === "undefined") return;
    JSON.parse(source.textContent).forEach((group) => {
      const container = document.querySelector(`[data-group="${CSS.escape(group.slug)}"]`);
      if (!container) return;
      const details = container.closest("details");
      if (!details || details.open) drawGroup(group);
      if (details) details.addEventListener("toggle", () => details.open && drawGroup(group));
    });
  }

  function tables() {
    document.querySelectorAll(".table-slot[data-src]").forEach((slot) => {
      const details = slot.closest("details");
      const load = () => {
        if (slot.dataset.loading) return;
        slot.dataset.loading = "1";
        fetch(slot.dataset.src, { credentials: "same-origin" })
          .then((r) => (r.ok ? r.text() : Promise.reject(new Error(r.statusText))))
          .then((html) => {
            // The table's own page, parsed inert; only its table is kept.
            const doc = new DOMParser().parseFromString(html, "text/html");
            const table = doc.querySelector(".table-fragment");
            if (!table) throw new Error("no table");
            slot.replaceWith(document.adoptNode(table));
          })
          .catch(() => { delete slot.dataset.loading; }); // the link stays
      };
      if (!details || details.open) load();
      if (details) details.addEventListener("toggle", () => details.open && load());
    });
  }

  function copyMarkdown() {
    // The Markdown is fetched when asked for (it is not in the page).
    const button = document.getElementById("copy-markdown");
    if (!button || !button.dataset.src) return;
    button.addEventListener("click", () => {
      const src = button.dataset.src;
      const text = fetch(src, { credentials: "same-origin" })
        .then((r) => (r.ok ? r.text() : Promise.reject(new Error(r.statusText))));
      const done = () => { button.textContent = "Copied"; };
      const show = () => { window.location.href = src; }; // to copy by hand
      const write = () => text.then((t) => navigator.clipboard.writeText(t));
      if (!navigator.clipboard) {
        show();
      } else if (window.ClipboardItem && navigator.clipboard.write) {
        // Safari copies only what the click itself promised.
        const blob = text.then((t) => new Blob([t], { type: "text/plain" }));
        navigator.clipboard.write([new ClipboardItem({ "text/plain": blob })])
          .then(done, () => write().then(done, show));
      } else {
        write().then(done, show);
      }
    });
  }

  charts();
  tables();
  copyMarkdown();
})();
