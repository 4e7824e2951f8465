/* Charts of the run, compare and report pages, from the JSON in #chart-data
 * (json_script): [{slug, bars: [...], lines: [...]}], one entry per test group.
 *
 * bars:  {title, axis, unit, categories: [test title], datasets: [{label,
 *         values, low, high, texts, noisy, marks, unsafe}]} -> horizontal
 *         bars, one category per test with its full title, one colour per
 *         run, each test on its own scale (one run alone: a log axis), the
 *         figure printed on each bar, whiskers low..high (none when the
 *         interval is too noisy to estimate) and each bar's mark against the
 *         reference (▲ ▼ = ≈ ?, ⚠ faster but unsafe) at its end.
 * lines: {title, axis, series: [{label, points: [{x, y, low, high, text,
 *         noisy}]}]} -> queue-depth curves as fio-plot draws them: depth on
 *         a log2 axis in numeric order, one line per run with its 95% band
 *         (none where too noisy), the figure printed at each point.
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

  // What each bar says, drawn on it: its figure (the table's text), "noisy"
  // when its interval is too wide to mean anything, its whisker (clipped at
  // the plot's edge, with an arrow) and its mark against the reference.
  const MARK_COLOURS = { "▲": "#2b8a3e", "▼": "#c92a2a", "⚠": "#c92a2a" };
  const valueLabels = {
    id: "valueLabels",
    afterDatasetsDraw(chart) {
      const ctx = chart.ctx;
      const x = chart.scales.x;
      const area = chart.chartArea;
      const small = chart.width < 420;
      chart.data.datasets.forEach((ds, di) => {
        const meta = chart.getDatasetMeta(di);
        if (meta.hidden) return;
        meta.data.forEach((bar, i) => {
          if (ds.data[i] === null || ds.data[i] === undefined) return;
          const start = Math.max(area.left, Math.min(bar.base, bar.x));
          const endBar = Math.max(bar.base, bar.x);
          const cap = Math.min(4, bar.height / 3);
          ctx.save();
          // Whisker.
          let end = endBar;
          const low = ds.low[i], high = ds.high[i];
          if (low !== null && high !== null && low !== undefined && high !== undefined) {
            const a = Math.max(area.left, x.getPixelForValue(low));
            const raw = x.getPixelForValue(high);
            const b = Math.min(area.right, raw);
            ctx.strokeStyle = "#212529";
            ctx.lineWidth = 1.2;
            ctx.beginPath();
            ctx.moveTo(a, bar.y); ctx.lineTo(b, bar.y);
            ctx.moveTo(a, bar.y - cap); ctx.lineTo(a, bar.y + cap);
            if (raw > area.right) { // beyond the plot: an arrow, not a cap
              ctx.moveTo(b - 5, bar.y - cap); ctx.lineTo(b, bar.y); ctx.lineTo(b - 5, bar.y + cap);
            } else {
              ctx.moveTo(b, bar.y - cap); ctx.lineTo(b, bar.y + cap);
            }
            ctx.stroke();
            end = Math.max(end, b);
          }
          // The figure, inside the bar when it fits, else after it.
          let text = ds.texts[i];
          if (ds.noisy[i]) text += " (noisy)";
          ctx.font = `${small ? 11 : 12}px system-ui, sans-serif`;
          ctx.textBaseline = "middle";
          const w = ctx.measureText(text).width;
          let after, left;
          if (endBar - start >= w + 8) {
            left = endBar - 4 - w;
            ctx.fillStyle = "#fff";
            ctx.textAlign = "right";
            ctx.fillText(text, endBar - 4, bar.y);
            after = end + 4;
          } else {
            left = Math.min(endBar + 4, area.right - w);
            ctx.textAlign = "left";
            ctx.lineWidth = 3;
            ctx.strokeStyle = "rgba(255,255,255,0.9)";
            ctx.strokeText(text, left, bar.y);
            ctx.fillStyle = "#1b1f24";
            ctx.fillText(text, left, bar.y);
            after = Math.max(end, left + w) + 4;
          }
          // What was written where, for the browser tests (each figure whole
          // inside the canvas).
          chart.$labels.push({ text, left, right: left + w, y: bar.y });
          // The mark against the reference (▲ better, ⚠ faster but unsafe…).
          const mark = (ds.marks[i] || "").split(" ")[0];
          if (mark && mark !== "reference") {
            ctx.fillStyle = MARK_COLOURS[mark] || "#495057";
            ctx.font = `bold ${small ? 11 : 12}px system-ui, sans-serif`;
            ctx.textAlign = "left";
            ctx.fillText(mark, Math.min(after, area.right + 2), bar.y);
          }
          ctx.restore();
        });
      });
    },
    beforeDraw(chart) { chart.$labels = []; },
  };

  // What each point of a queue-depth curve says, drawn beside it: its figure
  // (the table's text), "noisy" when its interval is too wide to mean
  // anything; above the point for the first run, below for the second, and
  // so on, so two curves' figures do not overprint; kept inside the canvas.
  const pointLabels = {
    id: "pointLabels",
    afterDatasetsDraw(chart) {
      const ctx = chart.ctx;
      const small = chart.width < 420;
      let series = 0;
      chart.data.datasets.forEach((ds, di) => {
        if (!ds.texts) return; // a band's edge
        const below = series % 2 === 1;
        series += 1;
        const meta = chart.getDatasetMeta(di);
        if (meta.hidden) return;
        meta.data.forEach((point, i) => {
          if (ds.data[i] === null || ds.data[i] === undefined) return;
          let text = ds.texts[i];
          if (ds.noisy[i]) text += " (noisy)";
          ctx.save();
          ctx.font = `${small ? 10 : 11}px system-ui, sans-serif`;
          ctx.textBaseline = below ? "top" : "bottom";
          ctx.textAlign = "left";
          const w = ctx.measureText(text).width;
          const left = Math.max(0, Math.min(point.x - w / 2, Math.floor(chart.width) - w));
          const y = below ? point.y + 6 : point.y - 6;
          ctx.lineWidth = 3;
          ctx.strokeStyle = "rgba(255,255,255,0.9)";
          ctx.strokeText(text, left, y);
          ctx.fillStyle = "#1b1f24";
          ctx.fillText(text, left, y);
          ctx.restore();
          // What was written where, for the browser tests.
          chart.$labels.push({ text, left, right: left + w, y });
        });
      });
    },
    beforeDraw(chart) { chart.$labels = []; },
  };

  function figure(container, title, describedBy, note) {
    const fig = document.createElement("figure");
    fig.className = "chart";
    const caption = document.createElement("figcaption");
    caption.textContent = title;
    if (note) {
      const small = document.createElement("small");
      small.className = "chart-note";
      small.textContent = note;
      caption.appendChild(document.createElement("br"));
      caption.appendChild(small);
    }
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

  // Tests that differ 1000x cannot share a linear axis: with runs side by
  // side, each test gets its own scale (its highest figure spans the plot)
  // and every bar carries its figure, so no axis is drawn.  One run alone
  // (the run page) has no one to stand beside: its tests share a log axis.
  function barChart(container, chart, tableId) {
    const several = chart.datasets.length > 1;
    const { canvas, box } = figure(
      container, chart.title, tableId,
      several ? `${chart.axis}. Each test has its own scale: bars are relative to its highest figure, printed on each bar.`
              : `${chart.axis}, log scale.`);
    const narrow = container.clientWidth < 600;
    const bars = chart.categories.length * Math.max(1, chart.datasets.length);
    const legend = several ? Math.ceil(chart.datasets.length / (narrow ? 1 : 2)) * 22 : 0;
    const wrapAt = narrow ? 16 : 30;
    const labelLines = chart.categories.reduce((n, c) => n + wrap(c, wrapAt).length, 0);
    box.style.height = Math.max(90, bars * (narrow ? 19 : 21), labelLines * 15) + legend + (several ? 24 : 50) + "px";
    // Per test: its highest figure (never its whisker) is the scale's 100.
    const top = chart.categories.map((_c, i) => Math.max(0, ...chart.datasets.map((ds) => ds.values[i] || 0)));
    const rel = (v, i) => (v === null || v === undefined || !top[i] ? null : (v / top[i]) * 100);
    const positive = chart.datasets.flatMap((ds) => ds.values.filter((v) => v > 0));
    const floor = positive.length ? Math.pow(10, Math.floor(Math.log10(Math.min(...positive)))) : 1;
    const datasets = chart.datasets.map((ds, k) => {
      const colour = palette[k % palette.length];
      const out = {
        label: ds.label + (ds.unsafe ? " ⚠ unsafe" : ""),
        raw: ds.values,
        texts: ds.values.map((v, i) => (ds.texts && ds.texts[i]) || (v === null ? "" : `${fmt.format(v)} ${chart.unit}`)),
        noisy: ds.noisy || ds.values.map(() => false),
        marks: ds.marks,
        backgroundColor: colour,
        barPercentage: 0.9,
        categoryPercentage: 0.88,
      };
      if (several) {
        out.data = ds.values.map(rel);
        out.low = ds.low.map(rel);
        out.high = ds.high.map(rel);
      } else {
        out.data = ds.values.map((v) => (v > 0 ? v : null));
        out.low = ds.low.map((v) => (v > 0 ? v : null));
        out.high = ds.high;
      }
      return out;
    });
    // On the log axis the whiskers fit whole: they cannot crush the bars.
    const ceiling = Math.max(0, ...chart.datasets.flatMap((ds) => ds.values.concat(ds.high))
      .filter((v) => v > 0));
    const x = several
      ? { min: 0, max: 100, display: false }
      : { type: "logarithmic", min: floor, max: ceiling * 1.25,
          ticks: { maxRotation: 0, autoSkip: true,
                   // 1, 2 and 5 of each decade: a log axis people can read.
                   callback: (v) => {
                     const m = v / Math.pow(10, Math.floor(Math.log10(v) + 1e-9));
                     return [1, 2, 5].some((k) => Math.abs(m - k) < 1e-6) ? fmt.format(v) : "";
                   } },
          title: { display: !narrow, text: chart.axis } };
    new Chart(canvas, {
      type: "bar",
      data: { labels: chart.categories.map((c) => wrap(c, wrapAt)), datasets },
      options: {
        indexAxis: "y",
        maintainAspectRatio: false,
        animation: false,
        layout: { padding: { right: 20 } },
        plugins: {
          legend: { display: several, position: "top", align: "start",
                    labels: { boxWidth: 12, font: { size: narrow ? 11 : 12 } } },
          tooltip: {
            callbacks: {
              label(item) {
                const ds = item.dataset, i = item.dataIndex;
                let text = `${ds.label}: ${ds.texts[i]}`;
                const src = chart.datasets[item.datasetIndex];
                if (ds.noisy[i]) text += " (95% interval too noisy to estimate)";
                else if (src.low[i] !== null && src.high[i] !== null) {
                  text += ` (95%: ${fmt.format(src.low[i])}–${fmt.format(src.high[i])} ${chart.unit})`;
                }
                if (ds.marks[i]) text += ` ${ds.marks[i].replace(/:$/, "")}`;
                return text;
              },
            },
          },
        },
        scales: {
          x,
          y: { ticks: { autoSkip: false, font: { size: narrow ? 10 : 12 } } },
        },
      },
      plugins: [valueLabels],
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
                      backgroundColor: colour, tension: 0, spanGaps: true,
                      texts: at("text"), noisy: at("noisy") });
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
        // Room above the top point and below the lowest for their figures.
        layout: { padding: { top: 16, bottom: 4 } },
      },
      plugins: [pointLabels],
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
