// ml_scratch03: the ring all-reduce, one step at a time. lp_ring runs the
// whole all-reduce in C++ (sim::run_ring) and hands back every step; this
// script shows step `at` of it (-1: the inputs, before the first step).
var ring = { run: null, at: -1, replay: null };

function ringParams() {
  return JSON.stringify({
    ranks: lumen.num("ranks"), length: lumen.num("length"),
    seed: lumen.num("seed"), op: lumen.$("op").value,
    latency_ms: lumen.num("latency"), mbytes_per_ms: lumen.num("bandwidth")
  });
}

function ringReset() {
  lumen.pause();
  var run = lumen.call("lp_ring", ["string"], [ringParams()]);
  if (run.error) return;
  ring.run = run;
  ring.at = -1;
  ringDraw();
}

// The steps shown: the reference's, or the replayed run's.
function ringFrames() {
  if (ring.replay && lumen.$("show-recorded").checked) return ring.replay.recorded;
  return ring.run.frames;
}

function ringStep() {
  if (ring.at + 1 >= ringFrames().length) return false;
  ring.at += 1;
  ringDraw();
  return ring.at + 1 < ringFrames().length;
}

function ringBack() {
  if (ring.at < 0) return;
  ring.at -= 1;
  ringDraw();
}

function bitsOf(mask, n) {
  var out = [];
  for (var r = 0; r < n; r++) if (Math.floor(mask / Math.pow(2, r)) % 2 === 1) out.push(r);
  return out;
}

function ringDraw() {
  var run = ring.run, n = run.ranks, frames = ringFrames();
  var f = ring.at >= 0 ? frames[ring.at] : null;
  var ref = ring.at >= 0 ? run.frames[ring.at] : null;
  var label = f ? "Step " + (ring.at + 1) + " of " + run.frames.length + ": " + f.phase +
                  " step " + (f.step + 1) + " of " + (n - 1) + " (t = " +
                  lumen.fmt(ref.time_ms) + " ms virtual)"
                : "Before the first step: every rank holds its own input";
  lumen.$("phase-label").textContent = label;
  lumen.$("step").disabled = ring.at + 1 >= frames.length;
  lumen.$("back").disabled = ring.at < 0;

  var svg = lumen.$("ring");
  svg.innerHTML = "";
  var cx = 330, cy = 220, radius = n <= 4 ? 150 : 175;
  var cell = Math.max(12, Math.min(34, 240 / n));
  var pos = [];
  for (var r = 0; r < n; r++) {
    var a = -Math.PI / 2 + 2 * Math.PI * r / n;
    pos.push({ x: cx + radius * Math.cos(a), y: cy + radius * Math.sin(a) });
  }
  var defs = lumen.svg("defs", {});
  var marker = lumen.svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: "9", refY: "5",
                                     markerWidth: "7", markerHeight: "7", orient: "auto" });
  marker.appendChild(lumen.svg("path", { d: "M0,0 L10,5 L0,10 z", fill: "#2156c7" }));
  defs.appendChild(marker);
  svg.appendChild(defs);
  // This step's messages, rank r to rank r+1.
  if (f) {
    for (var r = 0; r < n; r++) {
      var p = pos[r], q = pos[(r + 1) % n];
      var mx = (p.x + q.x) / 2, my = (p.y + q.y) / 2;
      var ox = (mx - cx) * 0.18, oy = (my - cy) * 0.18;
      svg.appendChild(lumen.svg("path", {
        d: "M" + p.x + "," + p.y + " Q" + (mx + ox) + "," + (my + oy) + " " + q.x + "," + q.y,
        fill: "none", stroke: "#2156c7", "stroke-width": "2", "marker-end": "url(#arrow)",
        opacity: "0.75" }));
      svg.appendChild(lumen.svg("text", { x: mx + ox * 1.6, y: my + oy * 1.6,
        "text-anchor": "middle", "data-link": r }, "chunk " + f.ranks[r].sent_chunk));
    }
  }
  var all = Math.pow(2, n) - 1;
  for (var r = 0; r < n; r++) {
    var p = pos[r], w = cell * n + 8;
    var g = lumen.svg("g", { "data-rank": r });
    g.appendChild(lumen.svg("rect", { x: p.x - w / 2, y: p.y - 24, width: w, height: cell + 30,
      rx: 5, fill: "#fff", stroke: "#5b6475" }));
    g.appendChild(lumen.svg("text", { x: p.x, y: p.y - 10, "text-anchor": "middle" },
      "rank " + r + (f ? "  \u2192 sends " + f.ranks[r].sent_chunk : "")));
    for (var c = 0; c < n; c++) {
      var mask = ref ? ref.ranks[r].holders[c] : Math.pow(2, r);
      var who = bitsOf(mask, n), full = mask === all;
      var x = p.x - w / 2 + 4 + c * cell, y = p.y - 2;
      var shade = full ? "#1b3a7a" : "hsl(220, 60%, " + (92 - 45 * (who.length - 1) / Math.max(1, n - 1)) + "%)";
      var rect = lumen.svg("rect", { x: x, y: y, width: cell - 2, height: cell - 2, fill: shade,
        stroke: f && f.ranks[r].received_chunk === c ? "#f2b705" : "#5b6475",
        "stroke-width": f && f.ranks[r].received_chunk === c ? 3 : 1 });
      rect.appendChild(lumen.svg("title", {}, "rank " + r + ", chunk " + c + ": holds the input of rank" +
        (who.length > 1 ? "s " : " ") + who.join(", ")));
      g.appendChild(rect);
      g.appendChild(lumen.svg("text", { x: x + (cell - 2) / 2, y: y + cell / 2 + 3, "text-anchor": "middle",
        style: "font-size:" + Math.min(11, cell / 3) + "px;fill:" + (full ? "#fff" : "#1d2330") },
        full ? "\u2713" : who.length + "/" + n));
    }
    svg.appendChild(g);
  }
  ringTable(f);
  ringBytes(f);
}

function ringTable(f) {
  var run = ring.run, n = run.ranks, len = run.length;
  var rows = "<tr><th>rank</th>";
  for (var i = 0; i < len; i++) {
    var c = 0;
    while (run.chunks[c][1] <= i) c++;
    rows += "<th title='element " + i + ", chunk " + c + "'>c" + c + "</th>";
  }
  rows += "</tr>";
  for (var r = 0; r < n; r++) {
    var buf = f ? f.ranks[r].buffer : run.inputs[r];
    rows += "<tr data-rank='" + r + "'><th>" + r + "</th>";
    for (var i = 0; i < len; i++) rows += "<td>" + lumen.fmt(buf[i]) + "</td>";
    rows += "</tr>";
  }
  rows += "<tr id='expected'><th title='" + run.op + " over every rank, element by element'>" +
          run.op + "</th>";
  for (var i = 0; i < len; i++) rows += "<td>" + lumen.fmt(run.expected[i]) + "</td>";
  rows += "</tr>";
  lumen.$("buffers").innerHTML = rows;
  var done = ring.at + 1 === ringFrames().length;
  var fin = lumen.$("final");
  if (!done) { fin.textContent = ""; fin.className = "status"; return; }
  var same = true;
  for (var r = 0; r < n; r++)
    for (var i = 0; i < len; i++) if (f.ranks[r].buffer[i] !== run.expected[i]) same = false;
  fin.textContent = same ? "Done: every rank holds the " + run.op + " of all N inputs (\u2713)."
                         : "Done, but some rank does not hold the " + run.op + " (\u2717): compare its row with the last.";
  fin.className = "status " + (same ? "ok" : "fail");
  fin.setAttribute("data-matches", same ? "1" : "0");
}

function ringBytes(f) {
  var run = ring.run, n = run.ranks;
  var last = run.frames[run.frames.length - 1];
  var t = "<tr><th>rank</th><th>ring: sent so far</th><th>ring: in all</th>" +
          "<th>2&middot;S&middot;(N&minus;1)/N</th><th>naive: in all</th></tr>";
  for (var r = 0; r < n; r++) {
    var now = f ? run.frames[ring.at].ranks[r].bytes_sent : 0;
    t += "<tr><th>" + r + "</th><td>" + now + "</td><td>" + last.ranks[r].bytes_sent + "</td><td>" +
         lumen.fmt(run.bound_bytes) + "</td><td>" + (r === 0 ? run.naive.root_bytes : run.naive.other_bytes) +
         "</td></tr>";
  }
  t += "<tr><th>time</th><td>" + (f ? lumen.fmt(run.frames[ring.at].time_ms) : 0) + " ms</td><td>" +
       lumen.fmt(last.time_ms) + " ms</td><td></td><td>" + lumen.fmt(run.naive.time_ms) + " ms</td></tr>";
  lumen.$("bytes").innerHTML = t;
  var svg = lumen.$("bars");
  svg.innerHTML = "";
  var max = Math.max(run.naive.root_bytes, last.ranks[0].bytes_sent, 1);
  var bar = function (y, label, value, colour) {
    svg.appendChild(lumen.svg("text", { x: 0, y: y + 13 }, label));
    svg.appendChild(lumen.svg("rect", { x: 230, y: y, width: Math.max(1, 340 * value / max), height: 16,
      fill: colour }));
    svg.appendChild(lumen.svg("text", { x: 236 + 340 * value / max, y: y + 13 }, value + " B"));
  };
  bar(10, "ring, each rank", last.ranks[0].bytes_sent, "#2156c7");
  bar(40, "bound 2\u00b7S\u00b7(N\u22121)/N", Math.round(run.bound_bytes), "#7a8bb8");
  bar(70, "naive, rank 0 (the root)", run.naive.root_bytes, "#b3261e");
  bar(100, "naive, every other rank", run.naive.other_bytes, "#e29a94");
}

function ringLoadReplay(text) {
  var v = lumen.call("lp_ring_replay", ["string"], [text]);
  var out = lumen.$("replay-verdict");
  if (v.error) { out.textContent = v.error; return; }
  if (v.reference) {
    // The replay is compared with the ring of its own size, on the
    // exercise's inputs: show that one.
    lumen.$("ranks").value = v.reference.ranks;
    lumen.$("length").value = v.reference.length;
    lumen.$("seed").value = 0;
    lumen.$("op").value = "sum";
    ring.run = v.reference;
  }
  ring.replay = v;
  out.textContent = (v.matches ? "Your run matches the reference at all " + v.steps + " steps."
                               : "Your run differs at step " + v.first_bad + ": " + v.what);
  out.className = "status " + (v.matches ? "ok" : "fail");
  out.setAttribute("data-matches", v.matches ? "1" : "0");
  out.setAttribute("data-first-bad", v.first_bad);
  var box = lumen.$("show-recorded");
  box.disabled = v.recorded.length === 0;
  box.checked = v.recorded.length > 0;
  ring.at = -1;
  ringDraw();
}

function pageStart() {
  lumen.$("reset").onclick = ringReset;
  lumen.$("step").onclick = ringStep;
  lumen.$("back").onclick = ringBack;
  lumen.$("play").onclick = function () {
    if (lumen.playing()) lumen.pause(); else lumen.play(ringStep);
  };
  lumen.$("show-recorded").onchange = function () { ring.at = -1; ringDraw(); };
  lumen.$("replay-file").onchange = function (e) {
    var file = e.target.files[0];
    if (!file) return;
    file.text().then(ringLoadReplay);
  };
  lumen.keys({ play: function () { lumen.$("play").click(); }, step: ringStep,
               back: ringBack, reset: ringReset });
  lumen.replay = ringLoadReplay;
  ringReset();
}
