/* Bar charts with 95% confidence-interval whiskers, and queue-depth lines.
 * Data comes from <script type="application/json"> blocks made by json_script:
 * #chart-data: [{title, unit, scale, bars: [{label, mean, low, high}]}]
 * #sweep-data: [{title, scale, series: [{label, points: [[depth, mean]]}]}]
 */
(function () {
  "use strict";
  const palette = ["#0b5cad", "#d9480f", "#2b8a3e", "#862e9c", "#e67700", "#1098ad",
                   "#c2255c", "#495057", "#5c940d", "#364fc7", "#a61e4d", "#087f5b"];

  // Draws the whiskers: for each bar, a line from low to high with caps.
  const errorBars = {
    id: "errorBars",
    afterDatasetsDraw(chart) {
      const ctx = chart.ctx;
      chart.data.datasets.forEach((ds, di) => {
        if (!ds.errors) return;
        const meta = chart.getDatasetMeta(di);
        meta.data.forEach((bar, i) => {
          const e = ds.errors[i];
          if (!e || e.low === null || e.high === null) return;
          const y = chart.scales.y;
          const top = y.getPixelForValue(e.high), bottom = y.getPixelForValue(e.low);
          ctx.save();
          ctx.strokeStyle = "#212529";
          ctx.lineWidth = 1.5;
          ctx.beginPath();
          ctx.moveTo(bar.x, top); ctx.lineTo(bar.x, bottom);
          ctx.moveTo(bar.x - 6, top); ctx.lineTo(bar.x + 6, top);
          ctx.moveTo(bar.x - 6, bottom); ctx.lineTo(bar.x + 6, bottom);
          ctx.stroke();
          ctx.restore();
        });
      });
    },
  };

  function canvasIn(container, title) {
    const figure = document.createElement("figure");
    figure.className = "chart";
    const caption = document.createElement("figcaption");
    caption.textContent = title;
    const canvas = document.createElement("canvas");
    figure.appendChild(caption);
    figure.appendChild(canvas);
    container.appendChild(figure);
    return canvas;
  }

  function read(id) {
    const el = document.getElementById(id);
    return el ? JSON.parse(el.textContent) : [];
  }

  function bars() {
    const container = document.getElementById("charts");
    if (!container) return;
    read("chart-data").forEach((chart) => {
      const scale = chart.scale || 1;
      const canvas = canvasIn(container, chart.title);
      // Leave room for the tallest whisker, not only the tallest bar.
      const top = Math.max(0, ...chart.bars.map((b) => (b.high === null ? b.mean : b.high) || 0));
      const short = (label) => (label.length > 38 ? label.slice(0, 37) + "…" : label);
      new Chart(canvas, {
        type: "bar",
        data: {
          labels: chart.bars.map((b) => short(b.label)),
          datasets: [{
            label: chart.unit,
            data: chart.bars.map((b) => (b.mean === null ? null : b.mean / scale)),
            backgroundColor: chart.bars.map((_, i) => palette[i % palette.length]),
            errors: chart.bars.map((b) => ({
              low: b.low === null ? null : b.low / scale,
              high: b.high === null ? null : b.high / scale,
            })),
          }],
        },
        options: {
          animation: false,
          plugins: { legend: { display: false } },
          scales: { y: { beginAtZero: true, suggestedMax: (top / scale) * 1.05,
                         title: { display: true, text: chart.unit } },
                    x: { ticks: { autoSkip: false, maxRotation: 60 } } },
        },
        plugins: [errorBars],
      });
    });
  }

  function sweeps() {
    const container = document.getElementById("sweeps");
    if (!container) return;
    read("sweep-data").forEach((chart) => {
      const scale = chart.scale || 1;
      const canvas = canvasIn(container, chart.title);
      new Chart(canvas, {
        type: "line",
        data: {
          datasets: chart.series.map((s, i) => ({
            label: s.label,
            data: s.points.map((p) => ({ x: p[0], y: p[1] / scale })),
            borderColor: palette[i % palette.length],
            backgroundColor: palette[i % palette.length],
          })),
        },
        options: {
          animation: false,
          scales: { x: { type: "logarithmic", title: { display: true, text: "iodepth" } },
                    y: { beginAtZero: true } },
        },
      });
    });
  }

  function copyMarkdown() {
    const button = document.getElementById("copy-markdown");
    const area = document.getElementById("markdown");
    if (!button || !area) return;
    button.addEventListener("click", () => {
      area.select();
      const done = () => { button.textContent = "Copied"; };
      if (navigator.clipboard) {
        navigator.clipboard.writeText(area.value).then(done, () => document.execCommand("copy") && done());
      } else if (document.execCommand("copy")) {
        done();
      }
    });
  }

  bars();
  sweeps();
  copyMarkdown();
})();
