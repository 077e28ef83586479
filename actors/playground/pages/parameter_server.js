// ml_scratch01/02: a parameter server and its workers in virtual time.
// lp_ps_reset builds the simulation in C++ (sim::ps_sim on ps_core);
// lp_ps_step runs events and answers with the state this script draws.
var ps = { state: null };

function psWindow() { return 30 * 10; } // 30 compute times of 10 ms

function psReset() {
  lumen.pause();
  var s = lumen.call("lp_ps_reset", ["string"], [JSON.stringify({
    mode: lumen.$("mode").value, workers: lumen.num("workers"),
    backup: lumen.num("backup"), lr: lumen.num("lr"),
    staleness_fix: lumen.$("fix").checked, straggler: lumen.num("straggler"),
    compression: lumen.$("compression").value, seed: lumen.num("seed") })]);
  if (s.error) return;
  ps.state = s;
  psDraw();
}

function psAdvance(events) {
  var s = lumen.call("lp_ps_step", ["number", "number"], [events, psWindow()]);
  if (s.error) return false;
  ps.state = s;
  psDraw();
  return true;
}

// One drawn frame of play: until the server's next version.
function psTick() {
  var s = lumen.call("lp_ps_run_to", ["number", "number"], [ps.state.version + 1, psWindow()]);
  if (s.error) return false;
  ps.state = s;
  psDraw();
  return true;
}

function psRunTo() {
  lumen.pause();
  var s = lumen.call("lp_ps_run_to", ["number", "number"], [lumen.num("target"), psWindow()]);
  if (s.error) return;
  ps.state = s;
  psDraw();
}

function psDraw() {
  var s = ps.state;
  var last = s.losses[s.losses.length - 1][2];
  var st = lumen.$("status");
  if (s.diverged) {
    st.textContent = "Diverged: the loss is " + lumen.fmt(last) + ", " +
      (isFinite(last) ? "over 100 times" : "far above") + " where it started (" +
      lumen.fmt(s.initial_loss) + ")" + (s.mode === "async" && !lumen.$("fix").checked
        ? ". Stale gradients at the full rate: turn the staleness fix on." : ".");
    st.className = "status fail";
  } else {
    st.textContent = "Loss " + lumen.fmt(last) + " (from " + lumen.fmt(s.initial_loss) + ")";
    st.className = "status ok";
  }
  st.setAttribute("data-diverged", s.diverged ? "1" : "0");
  st.setAttribute("data-loss", String(last));
  st.setAttribute("data-initial-loss", String(s.initial_loss));
  st.setAttribute("data-version", String(s.version));
  var refused = 0;
  for (var k in s.refused) refused += s.refused[k];
  var why = Object.keys(s.refused).map(function (k) { return k + " " + s.refused[k]; }).join(", ");
  lumen.$("server").innerHTML =
    "<tr><th>mode</th><td>" + s.mode + "</td></tr>" +
    "<tr><th>version</th><td id='version'>" + s.version + "</td></tr>" +
    "<tr><th>virtual time</th><td>" + lumen.fmt(s.time_ms, 1) + " ms</td></tr>" +
    "<tr><th>gradients applied</th><td>" + s.applied + "</td></tr>" +
    "<tr><th>refused</th><td>" + refused + (why ? " (" + why + ")" : "") + "</td></tr>" +
    "<tr><th>|w &minus; w*|</th><td>" + lumen.fmt(s.weight_error) + "</td></tr>" +
    "<tr><th>weights</th><td>" + s.weights.slice(0, 4).map(function (x) { return lumen.fmt(x); }).join(", ") +
    (s.weights.length > 4 ? ", &hellip;" : "") + "</td></tr>";
  lumen.$("event").textContent = s.event;
  psTimeline(s);
  psLoss(s);
  psStaleness(s);
  var rows = "<tr><th>worker</th><th>doing</th><th>on version</th><th>pushes</th><th>refused</th>" +
             "<th>last staleness</th><th>|gradient|</th></tr>";
  s.workers.forEach(function (w, i) {
    rows += "<tr data-worker='" + i + "'><th>" + i + (i === 0 && lumen.num("straggler") > 1 ? " (slow)" : "") +
            "</th><td>" + w.state + "</td><td>" + w.version + "</td><td>" + w.pushes + "</td><td>" +
            w.dropped + "</td><td>" + w.last_staleness + "</td><td>" + lumen.fmt(w.grad_norm) + "</td></tr>";
  });
  lumen.$("workers-table").innerHTML = rows;
}

function psTimeline(s) {
  var svg = lumen.$("timeline");
  svg.innerHTML = "";
  var n = s.workers.length, row = Math.max(8, Math.min(28, 170 / n));
  var height = 30 + n * row;
  svg.setAttribute("viewBox", "0 0 900 " + height);
  lumen.$("window").textContent = psWindow();
  var t1 = s.time_ms, t0 = t1 - psWindow(), x0 = 70, width = 820;
  var x = function (t) { return x0 + width * (Math.max(t, t0) - t0) / psWindow(); };
  var defs = lumen.svg("defs", {});
  var pat = lumen.svg("pattern", { id: "hatch", width: 6, height: 6, patternUnits: "userSpaceOnUse",
                                   patternTransform: "rotate(45)" });
  pat.appendChild(lumen.svg("rect", { width: 6, height: 6, fill: "#eceff5" }));
  pat.appendChild(lumen.svg("line", { x1: 0, y1: 0, x2: 0, y2: 6, stroke: "#8a93a6", "stroke-width": 2 }));
  defs.appendChild(pat);
  svg.appendChild(defs);
  for (var w = 0; w < n; w++)
    svg.appendChild(lumen.svg("text", { x: 0, y: 12 + w * row + row / 2 + 4 }, "worker " + w));
  var style = { computing: { fill: "#2156c7", inset: 0 }, pushing: { fill: "#e08a1e", inset: 0.3 },
                waiting: { fill: "url(#hatch)", inset: 0.1 } };
  var draw = function (worker, state, start, end, version) {
    var k = style[state], y = 12 + worker * row + row * k.inset, h = row * (1 - 2 * k.inset) - 2;
    var r = lumen.svg("rect", { x: x(start), y: y, width: Math.max(0.5, x(end) - x(start)),
                                height: Math.max(1, h), fill: k.fill });
    r.appendChild(lumen.svg("title", {}, "worker " + worker + " " + state + " on version " + version +
      " from " + lumen.fmt(start, 1) + " to " + lumen.fmt(end, 1) + " ms"));
    svg.appendChild(r);
    if (state === "computing" && x(end) - x(start) > 30 && row >= 12)
      svg.appendChild(lumen.svg("text", { x: x(start) + 3, y: y + h / 2 + 4,
        style: "fill:#fff;font-size:10px" }, "v" + version));
  };
  s.segments.forEach(function (g) { draw(g[0], g[1], g[2], g[3], g[4]); });
  // What each worker does now, up to the present.
  s.workers.forEach(function (w, i) {
    var since = t0;
    s.segments.forEach(function (g) { if (g[0] === i) since = Math.max(since, g[3]); });
    draw(i, w.state, since, t1, w.version);
  });
  svg.appendChild(lumen.svg("text", { x: x0, y: height - 2 }, lumen.fmt(Math.max(0, t0), 0) + " ms"));
  svg.appendChild(lumen.svg("text", { x: x0 + width, y: height - 2, "text-anchor": "end" },
                            lumen.fmt(t1, 0) + " ms"));
}

function psLoss(s) {
  var svg = lumen.$("loss");
  svg.innerHTML = "";
  var pts = s.losses, x0 = 50, y0 = 210, w = 820, h = 190;
  var vmax = Math.max(1, pts[pts.length - 1][1]);
  var logs = pts.map(function (p) { return isFinite(p[2]) && p[2] > 0 ? Math.log10(p[2]) : 30; });
  var lo = Math.min.apply(null, logs), hi = Math.max.apply(null, logs);
  lo = Math.floor(Math.min(lo, Math.log10(s.initial_loss) - 1));
  hi = Math.ceil(Math.min(Math.max(hi, lo + 1), 30));
  var path = "";
  pts.forEach(function (p, i) {
    var y = y0 - h * (Math.min(logs[i], hi) - lo) / (hi - lo);
    path += (i ? "L" : "M") + (x0 + w * p[1] / vmax).toFixed(1) + "," + y.toFixed(1);
  });
  svg.appendChild(lumen.svg("line", { x1: x0, y1: y0, x2: x0 + w, y2: y0, stroke: "#5b6475" }));
  svg.appendChild(lumen.svg("line", { x1: x0, y1: y0, x2: x0, y2: y0 - h, stroke: "#5b6475" }));
  var every = Math.max(1, Math.ceil((hi - lo) / 8));
  for (var e = lo; e <= hi; e += every) {
    var y = y0 - h * (e - lo) / (hi - lo);
    svg.appendChild(lumen.svg("text", { x: x0 - 4, y: y + 4, "text-anchor": "end" }, "1e" + e));
  }
  svg.appendChild(lumen.svg("text", { x: x0 + w, y: y0 + 16, "text-anchor": "end" }, "version " + vmax));
  svg.appendChild(lumen.svg("path", { d: path, fill: "none", stroke: s.diverged ? "#b3261e" : "#2156c7",
                                      "stroke-width": 2 }));
}

function psStaleness(s) {
  var svg = lumen.$("staleness");
  svg.innerHTML = "";
  var bins = s.staleness, x0 = 40, y0 = 175, w = 840, h = 150;
  if (bins.length === 0) {
    svg.appendChild(lumen.svg("text", { x: x0, y: 100 }, s.mode === "sync"
      ? "Sync: every gradient is of the current version (staleness 0)." : "No gradient applied yet."));
    return;
  }
  var kmax = bins[bins.length - 1][0], nmax = Math.max.apply(null, bins.map(function (b) { return b[1]; }));
  var bw = w / (kmax + 1);
  bins.forEach(function (b) {
    var bh = h * b[1] / nmax;
    svg.appendChild(lumen.svg("rect", { x: x0 + b[0] * bw + 1, y: y0 - bh, width: Math.max(1, bw - 2),
                                        height: bh, fill: "#2156c7" }));
    if (bw > 14) {
      svg.appendChild(lumen.svg("text", { x: x0 + b[0] * bw + bw / 2, y: y0 + 14, "text-anchor": "middle" }, b[0]));
      svg.appendChild(lumen.svg("text", { x: x0 + b[0] * bw + bw / 2, y: y0 - bh - 3, "text-anchor": "middle",
                                          style: "font-size:10px" }, b[1]));
    }
  });
  svg.appendChild(lumen.svg("line", { x1: x0, y1: y0, x2: x0 + w, y2: y0, stroke: "#5b6475" }));
}

function pageStart() {
  lumen.offerReplay();
  if (lumen.page === "ml_scratch02") {
    // The lesson of ml_scratch02: async with many workers, where staleness bites.
    lumen.$("mode").value = "async";
    lumen.$("workers").value = 8;
    lumen.$("lr").value = 0.3;
  } else {
    lumen.$("mode").value = "sync";
  }
  lumen.$("straggler").oninput = function () {
    lumen.$("straggler-value").textContent = lumen.$("straggler").value;
  };
  lumen.$("reset").onclick = psReset;
  lumen.$("step").onclick = function () { psAdvance(1); };
  lumen.$("run-to").onclick = psRunTo;
  lumen.$("play").onclick = function () {
    if (lumen.playing()) lumen.pause(); else lumen.play(psTick);
  };
  lumen.keys({ play: function () { lumen.$("play").click(); }, step: function () { psAdvance(1); },
               back: function () {}, reset: psReset });
  psReset();
}
