// The Sluice console's one script: draws the lag charts of a group page
// from the JSON the page embeds (#lag-history), with the vendored uPlot,
// and refreshes a running redrive's progress (#redrive) by asking its own
// page again, once a second, same-origin. No other network is used.
(function () {
  "use strict";
  var el = document.getElementById("lag-history");
  if (!el) { return; }
  var data = JSON.parse(el.textContent);
  var colors = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];
  document.querySelectorAll("[data-chart]").forEach(function (box) {
    var field = box.getAttribute("data-chart");
    if (!data.t || data.t.length === 0) {
      box.textContent = "No samples yet: the first arrives within one sampling interval.";
      return;
    }
    var series = [{}], cols = [data.t];
    data.series.forEach(function (s, i) {
      series.push({ label: s.label, stroke: colors[i % colors.length], width: 1.5, spanGaps: false });
      cols.push(s[field]);
    });
    var width = Math.max(320, Math.min(560, (box.parentElement.parentElement.clientWidth || 900) / 2 - 40));
    /* global uPlot */
    new uPlot({ width: width, height: 220, series: series, scales: { x: { time: true, range: [data.From, data.To] } },
      axes: [{}, { size: 60 }] }, cols, box);
  });
})();

(function () {
  "use strict";
  var box = document.getElementById("redrive");
  if (!box || box.getAttribute("data-state") !== "running") { return; }
  function refresh() {
    fetch(window.location.pathname, { credentials: "same-origin", cache: "no-store" }).then(function (resp) {
      if (!resp.ok) { throw new Error("HTTP " + resp.status); }
      return resp.text();
    }).then(function (html) {
      var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("redrive");
      if (!fresh) { return; }
      box.replaceWith(document.adoptNode(fresh));
      box = fresh;
      if (box.getAttribute("data-state") === "running") { window.setTimeout(refresh, 1000); }
    }).catch(function () {
      window.setTimeout(refresh, 5000); // the broker is away a moment: try again, more slowly
    });
  }
  window.setTimeout(refresh, 1000);
})();
