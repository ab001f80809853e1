// Draws every chart panel of a dashboard page with Chart.js. Each panel's data arrives as JSON
// in a <script type="application/json" class="chart-data"> element (written by html/template)
// and is parsed with JSON.parse, never inserted as markup: labels and dataset names are
// caller-chosen strings that Chart.js draws as text on the canvas. No custom HTML legend or
// tooltip is used for the same reason.
(function () {
  'use strict';
  Chart.defaults.animation = false;
  Chart.defaults.maintainAspectRatio = false;

  document.querySelectorAll('section.panel').forEach(function (section) {
    var dataEl = section.querySelector('script.chart-data');
    var canvas = section.querySelector('canvas.chart');
    if (!dataEl || !canvas) {
      return;
    }
    try {
      var d = JSON.parse(dataEl.textContent);
      var options = {
        responsive: true,
        plugins: {legend: {display: d.type === 'pie' || d.datasets.length > 1, labels: {boxWidth: 12}}},
      };
      if (d.type === 'line') {
        options.spanGaps = true; // a series without a row at some label still draws as a line
      }
      if (d.type !== 'pie') {
        options.scales = {
          x: {stacked: d.stacked, title: {display: d.xTitle !== '', text: d.xTitle}},
          y: {stacked: d.stacked, beginAtZero: true, title: {display: d.yTitle !== '', text: d.yTitle}},
        };
      }
      new Chart(canvas, {type: d.type, data: {labels: d.labels, datasets: d.datasets}, options: options});
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
