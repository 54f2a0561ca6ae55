"""The report page's inline style and its one small script (the page works without it:
it only filters the case list)."""

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}
h1{font-size:1.5em}h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;margin:.5em 0;display:block;max-width:100%;overflow-x:auto}
td,th{padding:.2em .6em;border-bottom:1px solid #eee;
text-align:left;vertical-align:top}td.n{text-align:right;font-variant-numeric:tabular-nums}
dl{display:grid;grid-template-columns:max-content minmax(0,1fr);gap:.1em 1em}dt{color:#666}
dd{margin:0;overflow-wrap:anywhere}code{overflow-wrap:anywhere}
details{border:1px solid #e4e4e4;border-radius:4px;margin:.4em 0;padding:.3em .6em}
summary{cursor:pointer}pre{white-space:pre-wrap;background:#f7f7f7;padding:.5em;max-height:24em;
overflow:auto}.yes{color:#11772d}.no{color:#b3261e}.disagree{background:#fff4d6}
figure{margin:1em 0}figure svg{max-width:100%;height:auto}.failed{color:#b3261e}
.small{color:#8a6d00}.scroll{overflow-x:auto;max-width:100%}
"""

SCRIPT = """
document.getElementById('filter').addEventListener('input', function () {
  var b = document.getElementById('bench').value, d = document.getElementById('dis').checked;
  document.querySelectorAll('#case-list details.case').forEach(function (el) {
    var ok = (!b || el.dataset.benchmark === b) && (!d || el.dataset.disagree === '1');
    el.style.display = ok ? '' : 'none';
  });
});
"""
