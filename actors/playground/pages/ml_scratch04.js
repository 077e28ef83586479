// ml_scratch04: data-parallel replicas whose gradients are all-reduced
// bucket by bucket while the backward pass goes on. lp_ddp_reset and
// lp_ddp_step run sim::ddp_sim in C++; this script draws its last step.
var ddp = { state: null };
var bucketColours = ["#2156c7", "#1b7f3b", "#b3261e", "#8a4fbf", "#e08a1e", "#00838f", "#6d4c41", "#c2185b"];

function ddpReset() {
  lumen.pause();
  var s = lumen.call("lp_ddp_reset", ["string"], [JSON.stringify({
    workers: lumen.num("workers"), lr: lumen.num("lr"),
    first_bucket_floats: lumen.num("first-bucket"), bucket_cap_floats: lumen.num("bucket-cap"),
    overlap: lumen.$("overlap").checked, same_init: lumen.$("same-init").checked,
    skip_a_bucket: lumen.$("skip").checked, rebroadcast_every: lumen.num("rebroadcast"),
    straggler: lumen.num("straggler"), mbytes_per_ms: lumen.num("bandwidth"),
    seed: lumen.num("seed") })]);
  if (s.error) return;
  ddp.state = s;
  ddpDraw();
}

function ddpStep() {
  var s = lumen.call("lp_ddp_step", ["number"], [1]);
  if (s.error) return false;
  ddp.state = s;
  ddpDraw();
  return true;
}

function ddpDraw() {
  var s = ddp.state, h = s.history, last = h.length ? h[h.length - 1] : null;
  lumen.$("step-label").textContent = last ? "Step " + last.step : "Before the first step";
  var st = lumen.$("step-label");
  st.setAttribute("data-step", last ? last.step : 0);
  st.setAttribute("data-drift", String(s.drift));
  st.setAttribute("data-loss", last ? String(last.loss) : "");
  if (last) {
    st.setAttribute("data-took", String(last.end_ms - last.start_ms));
    st.setAttribute("data-serial", String(last.serial_ms));
    st.setAttribute("data-backward-end", String(last.backward_end_ms - last.start_ms));
  }
  lumen.$("summary").innerHTML = last
    ? "<tr><th>mean batch loss</th><td>" + lumen.fmt(last.loss, 4) + "</td></tr>" +
      "<tr><th>step time</th><td>" + lumen.fmt(last.end_ms - last.start_ms) + " ms</td></tr>" +
      "<tr><th>all-reduces after backward</th><td>" + lumen.fmt(last.serial_ms) + " ms</td></tr>" +
      "<tr><th>saved by overlapping</th><td>" +
      lumen.fmt(100 * (1 - (last.end_ms - last.start_ms) / last.serial_ms), 1) + " %</td></tr>" +
      "<tr><th>drift between replicas</th><td id='drift'>" + lumen.fmt(last.drift) +
      (last.rebroadcast ? " (re-broadcast this step)" : "") + "</td></tr>"
    : "<tr><th>drift between replicas</th><td id='drift'>" + lumen.fmt(s.drift) + "</td></tr>";
  var rows = "<tr><th>bucket</th><th>layers</th><th>floats</th></tr>";
  s.buckets.forEach(function (b, i) {
    rows += "<tr><th style='color:" + bucketColours[i % bucketColours.length] + "'>b" + i + "</th><td>" +
            (b.first_layer === b.last_layer ? b.first_layer : b.first_layer + "&ndash;" + b.last_layer) +
            "</td><td>" + (b.params[1] - b.params[0]) + "</td></tr>";
  });
  lumen.$("buckets").innerHTML = rows;
  ddpGantt(s, last);
  ddpCurves(h);
  var reps = "<tr><th>replica</th><th>first weights</th><th>largest |w &minus; w<sub>rank 0</sub>|</th></tr>";
  s.replicas.forEach(function (r, i) {
    reps += "<tr><th>" + i + "</th><td>" + r.head.map(function (x) { return lumen.fmt(x, 4); }).join(", ") +
            ", &hellip;</td><td>" + lumen.fmt(r.from_rank0) + "</td></tr>";
  });
  lumen.$("replicas").innerHTML = reps;
}

function ddpGantt(s, last) {
  var svg = lumen.$("gantt");
  svg.innerHTML = "";
  if (!last) {
    svg.appendChild(lumen.svg("text", { x: 10, y: 30 }, "Step to see forward, backward and the all-reduces."));
    return;
  }
  var n = s.replicas.length, row = Math.max(22, Math.min(40, 320 / n)), x0 = 70, width = 810;
  var height = 20 + n * row + 20;
  svg.setAttribute("viewBox", "0 0 900 " + height);
  var span = last.end_ms - last.start_ms;
  var x = function (t) { return x0 + width * (t - last.start_ms) / span; };
  for (var w = 0; w < n; w++)
    svg.appendChild(lumen.svg("text", { x: 0, y: 14 + w * row + row / 2 }, "worker " + w));
  s.spans.forEach(function (g) {
    var worker = g[0], lane = g[1], what = g[2], bucket = g[3], start = g[4], end = g[5];
    var y = 10 + worker * row + (lane === 0 ? 0 : row / 2), hgt = row / 2 - 2;
    var fill = bucket < 0 ? "#9aa3b5" : bucketColours[bucket % bucketColours.length];
    var rect = lumen.svg("rect", { x: x(start), y: y, width: Math.max(0.5, x(end) - x(start)), height: hgt,
      fill: fill, opacity: what.indexOf("skipped") === 0 ? 0.3 : 1, "data-lane": lane });
    rect.appendChild(lumen.svg("title", {}, "worker " + worker + ": " + what + ", " +
      lumen.fmt(start - last.start_ms) + " to " + lumen.fmt(end - last.start_ms) + " ms"));
    svg.appendChild(rect);
    if (bucket >= 0 && x(end) - x(start) > 16)
      svg.appendChild(lumen.svg("text", { x: x(start) + 2, y: y + hgt - 3, style: "fill:#fff;font-size:10px" },
                                "b" + bucket));
  });
  var be = x(last.backward_end_ms);
  svg.appendChild(lumen.svg("line", { x1: be, y1: 4, x2: be, y2: height - 16, stroke: "#1d2330",
                                      "stroke-dasharray": "4 3" }));
  svg.appendChild(lumen.svg("text", { x: x0, y: height - 2 }, "0 ms"));
  svg.appendChild(lumen.svg("text", { x: x0 + width, y: height - 2, "text-anchor": "end" },
                            lumen.fmt(span) + " ms"));
}

function ddpCurves(h) {
  var svg = lumen.$("curves");
  svg.innerHTML = "";
  if (h.length === 0) return;
  var x0 = 60, y0 = 200, w = 780, ht = 180;
  var lmax = Math.max.apply(null, h.map(function (r) { return r.loss; }));
  var drift = Math.max.apply(null, h.map(function (r) { return r.drift; }));
  var dmax = Math.max(1e-6, drift); // a flat line at 0 while there is none
  var line = function (value, max, colour, label, yLabel) {
    var d = "";
    h.forEach(function (r, i) {
      d += (i ? "L" : "M") + (x0 + w * (i + 1) / h.length).toFixed(1) + "," +
           (y0 - ht * value(r) / max).toFixed(1);
    });
    svg.appendChild(lumen.svg("path", { d: d, fill: "none", stroke: colour, "stroke-width": 2 }));
    svg.appendChild(lumen.svg("text", { x: x0 + 8, y: yLabel, style: "fill:" + colour }, label));
  };
  svg.appendChild(lumen.svg("line", { x1: x0, y1: y0, x2: x0 + w, y2: y0, stroke: "#5b6475" }));
  line(function (r) { return r.loss; }, lmax, "#2156c7", "loss (max " + lumen.fmt(lmax) + ")", 16);
  line(function (r) { return r.drift; }, dmax, "#b3261e", "drift (max " + lumen.fmt(drift) + ")", 32);
  svg.appendChild(lumen.svg("text", { x: x0 + w, y: y0 + 16, "text-anchor": "end" }, "step " + h.length));
}

function pageStart() {
  lumen.offerReplay();
  lumen.$("straggler").oninput = function () {
    lumen.$("straggler-value").textContent = lumen.$("straggler").value;
  };
  lumen.$("reset").onclick = ddpReset;
  lumen.$("step").onclick = ddpStep;
  lumen.$("play").onclick = function () {
    if (lumen.playing()) lumen.pause(); else lumen.play(ddpStep);
  };
  lumen.keys({ play: function () { lumen.$("play").click(); }, step: ddpStep,
               back: function () {}, reset: ddpReset });
  ddpReset();
}
