// Draws every chart panel of a dashboard page with Chart.js. Each panel's data arrives as JSON
// in a <script type="application/json" class="chart-data"> element (written by html/template)
// and is parsed with JSON.parse, never inserted as markup: labels, dataset names and tooltip
// texts are caller-chosen strings that Chart.js draws as text on the canvas, and the titles of
// small multiples are set with textContent. The server shapes the data (top N and "other",
// minimum calls, tooltip texts with counts, colours, funnel conversions); this script only
// picks Chart.js options and formats axis ticks.
(function () {
  'use strict';
  Chart.defaults.animation = false;
  Chart.defaults.maintainAspectRatio = false;
  Chart.defaults.font.family = 'system-ui, -apple-system, "Segoe UI", Roboto, sans-serif';

  // Axis tick texts per column format (dashboards.Format*); the server formats every other text.
  function trim(s) {
    return s.indexOf('.') < 0 ? s : s.replace(/0+$/, '').replace(/\.$/, '');
  }
  function tick(format, v) {
    if (typeof v !== 'number') {
      return v;
    }
    switch (format) {
      case 'percent':
        return trim((v * 100).toFixed(Math.abs(v) < 0.01 && v !== 0 ? 2 : 1)) + '%';
      case 'pp':
        return trim((v * 100).toFixed(1)) + ' pp';
      case 'change':
        return trim((v * 100).toFixed(0)) + '%';
      case 'ms':
        return Math.abs(v) >= 1000 ? trim((v / 1000).toFixed(2)) + ' s' : trim(v.toFixed(v % 1 ? 1 : 0)) + ' ms';
      case 'chars':
      case 'count':
        return Math.round(v).toLocaleString('en-US');
      default:
        return trim(v.toFixed(3));
    }
  }

  var displayFormats = {minute: 'HH:mm', hour: 'MMM d HH:mm', day: 'MMM d', week: 'MMM d', month: 'MMM yyyy'};

  function xScale(d) {
    var s = {
      stacked: d.stacked,
      title: {display: d.xTitle !== '', text: d.xTitle},
      ticks: {maxRotation: 0, autoSkip: true, autoSkipPadding: 12},
    };
    if (d.xTime) {
      s.type = 'time';
      s.adapters = {date: {zone: 'UTC'}};
      s.time = {tooltipFormat: 'yyyy-MM-dd HH:mm \'UTC\'', displayFormats: displayFormats};
      if (d.xUnit) {
        s.time.unit = d.xUnit;
      }
      s.offset = d.type === 'bar';
    }
    return s;
  }

  function datasetFor(d, ds) {
    var out = {label: ds.label, data: ds.data, tips: ds.tips};
    if (d.type === 'pie' || d.type === 'funnel') {
      out.backgroundColor = ds.colors;
      return out;
    }
    out.borderColor = ds.color;
    out.backgroundColor = ds.color;
    if (d.type === 'bar') {
      out.maxBarThickness = 56; // one bar on a wide axis stays a bar
    }
    if (d.type === 'line') {
      out.borderWidth = 2;
      out.pointRadius = 2;
      out.pointHoverRadius = 4;
      if (ds.threshold) {
        out.borderDash = [6, 4];
        out.borderWidth = 1.5;
        out.pointRadius = 0;
        // A ratchet holds its value until the next run changes it: Chart.js's 'before' draws
        // the previous point's value across, then steps at the next point.
        out.stepped = 'before';
        out.backgroundColor = 'transparent';
      }
    }
    return out;
  }

  function tooltipLabel(ctx) {
    var ds = ctx.dataset;
    var tip = ds.tips && ds.tips[ctx.dataIndex];
    if (tip) {
      return ds.label + ': ' + tip;
    }
    return undefined; // Chart.js's default
  }

  function options(d) {
    var o = {
      responsive: true,
      plugins: {
        legend: {display: d.type === 'pie' || d.datasets.length > 1, labels: {boxWidth: 14}},
        tooltip: {callbacks: {label: tooltipLabel}},
      },
    };
    if (d.type === 'line') {
      o.spanGaps = d.spanGaps > 0 ? d.spanGaps : true;
    }
    if (d.type === 'pie') {
      return o;
    }
    if (d.type === 'funnel') {
      o.indexAxis = 'y';
      o.layout = {padding: {left: 6}};
      o.plugins.legend.display = false;
      o.scales = {y: {display: true, grid: {display: false}, ticks: {font: {size: 12}}}};
      return o;
    }
    o.scales = {
      x: xScale(d),
      y: {
        stacked: d.stacked,
        beginAtZero: true,
        title: {display: d.yTitle !== '', text: d.yTitle},
        ticks: {callback: function (v) { return tick(d.yFormat, v); }},
      },
    };
    if (d.yFormat === 'count' || d.yFormat === 'chars') {
      o.scales.y.ticks.precision = 0; // no "2.5 tools"
    }
    if (d.yAtLeast !== null && d.yAtLeast !== undefined) {
      o.scales.y.suggestedMax = d.yAtLeast; // small multiples share one scale
    }
    if (d.yMax !== null && d.yMax !== undefined) {
      o.scales.y.max = d.yMax;
    }
    if (d.references && d.references.length) {
      var annotations = {};
      d.references.forEach(function (r, i) {
        annotations['reference' + i] = {
          type: 'line', scaleID: 'y', value: r.value, borderColor: '#b42318', borderWidth: 1.5, borderDash: [6, 4],
          label: {display: true, content: r.label, position: 'end', backgroundColor: 'rgba(180, 35, 24, 0.8)', font: {size: 10}, padding: 3},
        };
      });
      o.plugins.annotation = {annotations: annotations};
    }
    return o;
  }

  function draw(canvas, d) {
    return new Chart(canvas, {
      type: d.type,
      data: {labels: d.labels, datasets: d.datasets.map(function (ds) { return datasetFor(d, ds); })},
      options: options(d),
    });
  }

  document.querySelectorAll('section.panel').forEach(function (section) {
    var dataEl = section.querySelector('script.chart-data');
    if (!dataEl) {
      return;
    }
    try {
      var d = JSON.parse(dataEl.textContent);
      if (d.multiples && d.multiples.length) {
        var holder = section.querySelector('div.multiples');
        d.multiples.forEach(function (m) {
          var box = document.createElement('div');
          box.className = 'multiple';
          var title = document.createElement('h3');
          title.textContent = m.title;
          var wrap = document.createElement('div');
          wrap.className = 'chart-wrap small';
          var canvas = document.createElement('canvas');
          canvas.className = 'chart';
          canvas.setAttribute('role', 'img');
          canvas.setAttribute('aria-label', m.title);
          wrap.appendChild(canvas);
          box.appendChild(title);
          box.appendChild(wrap);
          holder.appendChild(box);
          draw(canvas, m.chart);
        });
        return;
      }
      var canvas = section.querySelector('canvas.chart');
      if (canvas) {
        draw(canvas, d);
      }
    } catch (e) {
      section.dataset.chartError = 'true';
      console.error('mcpulse: panel ' + section.dataset.panel + ' could not be drawn:', e);
    }
  });

  // The filter form leaves empty fields out of the URL, so a shared link names only the
  // filters that are set.
  var form = document.querySelector('form.filters');
  if (form) {
    form.addEventListener('submit', function () {
      form.querySelectorAll('input').forEach(function (input) {
        if (input.value === '') {
          input.disabled = true;
        }
      });
    });
  }
  document.body.dataset.chartsReady = 'true';
})();
