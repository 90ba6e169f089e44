// report.js: draws the replay report's charts with the dashboard's
// chart.js (which comes first in the same script) from the data block.
(function () {
  const data = JSON.parse(document.getElementById('report-data').textContent);
  const rec = DegradedCharts.fromSeries(data.recorded);
  const cand = DegradedCharts.fromSeries(data.candidate);
  const root = document.getElementById('charts');
  function draw() {
    DegradedCharts.render(root, {
      from: rec.from, to: rec.to, bucket: rec.bucket, tables: rec.tables, marks: rec.marks, signals: rec.signals,
      lanes: [
        { id: 'recorded', title: 'Recorded level (dashed: the candidate\u2019s)', bands: rec.bands, tables: rec.tables, flags: true, overlay: { id: 'candidate', bands: cand.bands } },
        { id: 'candidate', title: 'Candidate level', bands: cand.bands, tables: cand.tables },
      ],
      thresholds: [
        { id: 'recorded', label: 'Recorded table', tables: rec.tables, judged: { bands: rec.bands } },
        { id: 'candidate', label: 'Candidate table', tables: cand.tables },
      ],
    });
    root.dataset.rendered = '1';
  }
  draw();
  let resized = null;
  window.addEventListener('resize', () => { clearTimeout(resized); resized = setTimeout(draw, 200); });
}());
