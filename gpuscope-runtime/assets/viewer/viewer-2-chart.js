  // gpuscope memory viewer, part 2 of 3: the chart of allocated memory over time.
  // ---------------------------------------------------------------- chart
  var chart = document.getElementById('chart');
  var xMode = 'event';
  var view = { lo: 0, hi: n }; // in x units: event index, or time (ns)
  function xMax() { return xMode === 'event' ? n : (n ? time[n - 1] : 1); }
  function xOfEvent(i) { return xMode === 'event' ? i + 0.5 : time[i]; }
  // First event whose x is >= v.
  function eventAt(v) {
    if (xMode === 'event') return Math.max(0, Math.min(n, Math.ceil(v - 0.5)));
    var lo = 0, hi = n;
    while (lo < hi) { var m = (lo + hi) >> 1; if (time[m] < v) lo = m + 1; else hi = m; }
    return lo;
  }
  var PAD = { left: 72, right: 12, top: 10, bottom: 26 };
  var cols = null; // per-column state of the last draw

  function drawChart() {
    var t0 = performance.now();
    var cv = setupCanvas(chart, 320);
    var ctx = cv.ctx;
    ctx.clearRect(0, 0, cv.w, cv.h);
    var pw = Math.max(10, Math.floor(cv.w - PAD.left - PAD.right));
    var ph = cv.h - PAD.top - PAD.bottom;
    if (!H || n === 0) {
      ctx.fillStyle = '#656d76';
      ctx.font = '13px system-ui, sans-serif';
      ctx.fillText(H ? 'The history has no events.' : 'No allocation history in this snapshot (record one with gpuscope::memory::record_history).', PAD.left, PAD.top + 20);
      V.drawn.series = 0;
      V.drawn.columns = 0;
      cols = null;
      return;
    }
    var lo = view.lo, hi = view.hi, span = Math.max(hi - lo, 1e-9);
    // Walk every event: per-group bytes; per pixel column, the state at the moment of
    // its highest total, and its highest reserved.
    var cur = new Float64Array(G);
    cur[0] = H.baseAllocated;
    var colVals = new Float64Array(pw * G);
    var colTotal = new Float64Array(pw).fill(-1);
    var colRes = new Float64Array(pw);
    var colFirst = new Int32Array(pw).fill(-1);
    var colLast = new Int32Array(pw).fill(-1);
    var first = eventAt(lo), last = eventAt(hi);
    var colEnd = new Float64Array(pw * G);
    var start = null, lastCol = -1;
    for (var i = 0; i < n; i++) {
      if (i >= last) break;
      var inRange = i >= first;
      var c = 0;
      if (inRange) {
        if (start === null) start = cur.slice();
        c = Math.floor((xOfEvent(i) - lo) / span * pw);
        if (c < 0) c = 0; else if (c >= pw) c = pw - 1;
        if (c !== lastCol) {
          if (lastCol >= 0) colEnd.set(cur, lastCol * G);
          lastCol = c;
        }
      }
      var k = kind[i], g = grp[i];
      if (k === 0) cur[g] += size[i]; else if (k === 1) cur[g] -= size[i];
      if (!inRange) continue;
      if (colFirst[c] < 0) colFirst[c] = i;
      colLast[c] = i;
      if (allocAfter[i] > colTotal[c]) {
        colTotal[c] = allocAfter[i];
        for (var j = 0; j < G; j++) colVals[c * G + j] = cur[j];
      }
      if (resAfter[i] > colRes[c]) colRes[c] = resAfter[i];
    }
    if (lastCol >= 0) colEnd.set(cur, lastCol * G);
    if (start === null) start = cur.slice();
    // Columns without an event carry the state before them.
    var carry = start, carryAt = 0;
    var carryRes = first > 0 ? resAfter[Math.min(first, n) - 1] : H.baseReserved;
    for (var cc = 0; cc < pw; cc++) {
      if (colTotal[cc] < 0) {
        var tot = 0;
        for (var j2 = 0; j2 < G; j2++) { colVals[cc * G + j2] = carry[carryAt + j2]; tot += carry[carryAt + j2]; }
        colTotal[cc] = tot;
        colRes[cc] = carryRes;
      } else {
        carry = colEnd;
        carryAt = cc * G;
        carryRes = resAfter[colLast[cc]];
      }
    }
    var yMax = 0;
    var fitAllocated = document.getElementById('fit').checked;
    for (var c3 = 0; c3 < pw; c3++) yMax = Math.max(yMax, colTotal[c3], fitAllocated ? 0 : colRes[c3]);
    yMax = niceMax((yMax || 1) * 1.04);
    function yOf(v) { return PAD.top + ph - v / yMax * ph; }

    // Axes and grid.
    ctx.font = '11px system-ui, sans-serif';
    ctx.fillStyle = '#656d76';
    ctx.strokeStyle = '#eaeef2';
    ctx.lineWidth = 1;
    for (var gl = 0; gl <= 4; gl++) {
      var v = yMax * gl / 4, y = Math.round(yOf(v)) + 0.5;
      ctx.beginPath(); ctx.moveTo(PAD.left, y); ctx.lineTo(PAD.left + pw, y); ctx.stroke();
      ctx.textAlign = 'right';
      ctx.fillText(fmtBytes(v), PAD.left - 6, y + 4);
    }
    for (var xl = 0; xl <= 4; xl++) {
      var xv = lo + span * xl / 4;
      var label = xMode === 'event' ? 'event ' + Math.round(xv) : fmtTime(xv);
      ctx.textAlign = xl === 0 ? 'left' : xl === 4 ? 'right' : 'center';
      ctx.fillText(label, PAD.left + pw * xl / 4, cv.h - 8);
    }

    // Stacked bands, bottom to top.
    var base = new Float64Array(pw);
    var drawnSeries = 0;
    order.forEach(function (g) {
      var any = false;
      for (var c4 = 0; c4 < pw; c4++) if (colVals[c4 * G + g] > 0) { any = true; break; }
      if (!any) return;
      drawnSeries++;
      ctx.beginPath();
      ctx.moveTo(PAD.left, yOf(base[0]));
      for (var c5 = 0; c5 < pw; c5++) {
        var top = base[c5] + Math.max(0, colVals[c5 * G + g]);
        ctx.lineTo(PAD.left + c5, yOf(top));
        ctx.lineTo(PAD.left + c5 + 1, yOf(top));
      }
      for (var c6 = pw - 1; c6 >= 0; c6--) {
        ctx.lineTo(PAD.left + c6 + 1, yOf(base[c6]));
        ctx.lineTo(PAD.left + c6, yOf(base[c6]));
      }
      ctx.closePath();
      ctx.globalAlpha = selectedGroup < 0 || selectedGroup === g ? 0.9 : 0.35;
      ctx.fillStyle = groupColor(g);
      ctx.fill();
      ctx.globalAlpha = 1;
      for (var c7 = 0; c7 < pw; c7++) base[c7] += Math.max(0, colVals[c7 * G + g]);
    });
    // Reserved: a line (clipped to the plot when the scale fits allocated memory).
    ctx.save();
    ctx.beginPath();
    ctx.rect(PAD.left, PAD.top, pw, ph);
    ctx.clip();
    ctx.strokeStyle = '#1f2328';
    ctx.lineWidth = 1.5;
    ctx.setLineDash([5, 3]);
    ctx.beginPath();
    for (var c8 = 0; c8 < pw; c8++) {
      var yr = yOf(colRes[c8]);
      if (c8 === 0) ctx.moveTo(PAD.left, yr); else ctx.lineTo(PAD.left + c8, yr);
      ctx.lineTo(PAD.left + c8 + 1, yr);
    }
    ctx.stroke();
    ctx.setLineDash([]);
    ctx.restore();
    ctx.strokeStyle = '#8c959f';
    ctx.lineWidth = 1;
    ctx.strokeRect(PAD.left + 0.5, PAD.top + 0.5, pw, ph);
    if (drag) {
      ctx.fillStyle = 'rgba(9,105,218,0.15)';
      var dx0 = Math.min(drag.x0, drag.x1), dx1 = Math.max(drag.x0, drag.x1);
      ctx.fillRect(dx0, PAD.top, dx1 - dx0, ph);
    }
    cols = { pw: pw, ph: ph, vals: colVals, total: colTotal, res: colRes, first: colFirst, last: colLast, yMax: yMax, lo: lo, span: span };
    V.drawn.series = drawnSeries;
    V.drawn.columns = pw;
    V.timings.chart = performance.now() - t0;
  }
  function niceMax(v) {
    var p = Math.pow(2, Math.ceil(Math.log2(v)));
    var steps = [0.5, 0.625, 0.75, 0.875, 1];
    for (var i = 0; i < steps.length; i++) if (p * steps[i] >= v) return p * steps[i];
    return p;
  }

  // Which band is under a point of the chart.
  function chartHit(px, py) {
    if (!cols) return null;
    var c = Math.floor(px - PAD.left);
    if (c < 0 || c >= cols.pw || py < PAD.top || py > PAD.top + cols.ph) return null;
    var v = (PAD.top + cols.ph - py) / cols.ph * cols.yMax;
    var acc = 0, hit = -1;
    for (var oi = 0; oi < order.length; oi++) {
      var g = order[oi], val = Math.max(0, cols.vals[c * G + g]);
      if (v >= acc && v < acc + val) { hit = g; break; }
      acc += val;
    }
    return { col: c, group: hit };
  }
  V.chartPoint = function (g) {
    // The client point in the middle of group g's band where it is widest.
    if (!cols) return null;
    var best = -1, bestV = 0;
    for (var c = 0; c < cols.pw; c++) if (cols.vals[c * G + g] > bestV) { bestV = cols.vals[c * G + g]; best = c; }
    if (best < 0) return null;
    var acc = 0;
    for (var oi = 0; oi < order.length; oi++) {
      var og = order[oi];
      if (og === g) break;
      acc += Math.max(0, cols.vals[best * G + og]);
    }
    var mid = acc + bestV / 2;
    var rect = chart.getBoundingClientRect();
    return { x: rect.left + PAD.left + best + 0.5, y: rect.top + PAD.top + cols.ph - mid / cols.yMax * cols.ph };
  };

  var drag = null;
  chart.addEventListener('mousemove', function (ev) {
    var rect = chart.getBoundingClientRect();
    var px = ev.clientX - rect.left, py = ev.clientY - rect.top;
    if (drag) { drag.x1 = px; drawChart(); return; }
    var hit = chartHit(px, py);
    if (!hit) { hideTip(); return; }
    var c = hit.col, e0 = cols.first[c], e1 = cols.last[c];
    var lines = [];
    if (hit.group >= 0) {
      var g = hit.group;
      lines.push((groups[g].site >= 0 ? 'site ' : '') + groups[g].name);
      lines.push('  ' + fmtBytes(cols.vals[c * G + g]) + ' allocated here');
    }
    lines.push('allocated ' + fmtBytes(cols.total[c]) + ', reserved ' + fmtBytes(cols.res[c]));
    if (e0 >= 0) {
      lines.push('events ' + e0 + (e1 > e0 ? '–' + e1 : '') + ' at ' + fmtTime(time[e0]));
      if (e0 === e1) {
        var what = ['alloc', 'free', 'segment alloc', 'segment free'][kind[e0]];
        var s = siteName(site[e0]);
        lines.push(what + ' ' + fmtBytes(size[e0]) + (s ? ' at ' + s : ''));
      }
    }
    showTip(lines.join('\n'), ev.clientX, ev.clientY);
  });
  chart.addEventListener('mouseleave', function () { hideTip(); });
  chart.addEventListener('mousedown', function (ev) {
    var rect = chart.getBoundingClientRect();
    drag = { x0: ev.clientX - rect.left, x1: ev.clientX - rect.left };
  });
  window.addEventListener('mouseup', function (ev) {
    if (!drag) return;
    var d = drag;
    drag = null;
    if (Math.abs(d.x1 - d.x0) < 4) {
      // A click: select the band under it.
      var rect = chart.getBoundingClientRect();
      var hit = chartHit(ev.clientX - rect.left, ev.clientY - rect.top);
      if (hit && hit.group >= 0) showGroup(hit.group);
      drawChart();
      return;
    }
    var a = Math.min(d.x0, d.x1) - PAD.left, b = Math.max(d.x0, d.x1) - PAD.left;
    var lo = cols.lo + Math.max(0, a) / cols.pw * cols.span;
    var hi = cols.lo + Math.min(cols.pw, b) / cols.pw * cols.span;
    if (hi - lo > (xMode === 'event' ? 1 : 1)) { view.lo = lo; view.hi = hi; }
    drawChart();
  });
  chart.addEventListener('wheel', function (ev) {
    if (!cols) return;
    ev.preventDefault();
    var rect = chart.getBoundingClientRect();
    var f = Math.max(0, Math.min(1, (ev.clientX - rect.left - PAD.left) / cols.pw));
    var at = view.lo + f * (view.hi - view.lo);
    var scale = ev.deltaY > 0 ? 1.25 : 0.8;
    var w = Math.max((view.hi - view.lo) * scale, xMode === 'event' ? 4 : 1);
    var lo = at - f * w, hi = lo + w;
    if (lo < 0) { hi -= lo; lo = 0; }
    if (hi > xMax()) { lo -= hi - xMax(); hi = xMax(); }
    view.lo = Math.max(0, lo);
    view.hi = hi;
    drawChart();
  }, { passive: false });
  function resetZoom() { view.lo = 0; view.hi = xMax(); drawChart(); }
  chart.addEventListener('dblclick', resetZoom);
  document.getElementById('reset').addEventListener('click', resetZoom);
  document.getElementById('fit').addEventListener('change', drawChart);
  document.getElementById('xaxis').addEventListener('change', function (ev) {
    xMode = ev.target.value;
    resetZoom();
  });
  V.zoom = function (lo, hi) { view.lo = lo; view.hi = hi; drawChart(); return V.drawn; };

