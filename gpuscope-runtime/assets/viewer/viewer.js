// gpuscope memory viewer: reads the JSON in #gpuscope-data and draws, on canvases,
// allocated memory over time stacked by creating site (with reserved memory as a line),
// the segment map, and the live tensors. No network, no library.
(function () {
  'use strict';
  var V = (window.gpuscopeViewer = { drawn: {}, timings: {}, ready: false });
  var tStart = performance.now();
  var D = JSON.parse(document.getElementById('gpuscope-data').textContent);
  V.timings.parse = performance.now() - tStart;

  // ---------------------------------------------------------------- helpers
  var UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  function fmtBytes(b) {
    var neg = b < 0;
    b = Math.abs(b);
    if (b < 1024) return (neg ? '-' : '') + Math.round(b) + ' B';
    var u = 0;
    while (b >= 1024 && u < UNITS.length - 1) { b /= 1024; u++; }
    return (neg ? '-' : '') + b.toFixed(2) + ' ' + UNITS[u];
  }
  function fmtTime(ns) {
    if (ns < 1e3) return ns.toFixed(0) + ' ns';
    if (ns < 1e6) return (ns / 1e3).toFixed(1) + ' µs';
    if (ns < 1e9) return (ns / 1e6).toFixed(2) + ' ms';
    return (ns / 1e9).toFixed(3) + ' s';
  }
  function hex(n) { return '0x' + Math.round(n).toString(16); }
  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    if (attrs) for (var a in attrs) e.setAttribute(a, attrs[a]);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  var PALETTE = ['#4e79a7', '#59a14f', '#e15759', '#76b7b2', '#edc948',
    '#b07aa1', '#ff9da7', '#9c755f', '#2f6f8f', '#8cd17d', '#d37295', '#86bcb6',
    '#fabfd2', '#b6992d', '#499894'];
  function groupColor(g) {
    if (g === 0) return '#8b949e'; // allocated before the history
    if (g === 1) return '#7a9cc6'; // no site recorded
    if (g === 2) return '#6e7781'; // other sites
    return PALETTE[(g - 3) % PALETTE.length];
  }
  var groups = D.groups;
  var G = groups.length;
  var sites = D.sites;
  function siteName(i) { return i >= 0 && i < sites.length ? sites[i] : null; }

  // ---------------------------------------------------------------- summary
  document.getElementById('title').textContent = D.title;
  var H = D.history || null;
  var n = H ? H.k.length : 0;
  var summary = document.getElementById('summary');
  function addFact(label, value) {
    summary.appendChild(document.createTextNode(label + ' '));
    summary.appendChild(el('b', null, value));
    summary.appendChild(document.createTextNode('   '));
  }
  addFact('device', D.device);
  addFact('allocated', fmtBytes(D.allocated));
  addFact('reserved', fmtBytes(D.reserved));
  addFact('segments', String(D.segments.length));
  addFact('blocks', String(D.blocks.length));
  addFact('events', H ? n + (H.dropped ? ' (' + H.dropped + ' older dropped)' : '') : 'no history');

  // ---------------------------------------------------------------- history
  var kind, size, grp, site, time, allocAfter, resAfter;
  var peakAlloc = 0, peakRes = 0, groupPeak = new Float64Array(G);
  var tPrep = performance.now();
  if (H) {
    kind = Int8Array.from(H.k);
    size = Float64Array.from(H.s);
    grp = Int32Array.from(H.g);
    site = Int32Array.from(H.x);
    time = new Float64Array(n);
    allocAfter = new Float64Array(n);
    resAfter = new Float64Array(n);
    var tt = 0, a = H.baseAllocated, r = H.baseReserved;
    var cur = new Float64Array(G);
    cur[0] = H.baseAllocated;
    groupPeak[0] = cur[0];
    for (var i = 0; i < n; i++) {
      tt += H.t[i];
      time[i] = tt;
      var k = kind[i], s = size[i], g = grp[i];
      if (k === 0) { a += s; cur[g] += s; if (cur[g] > groupPeak[g]) groupPeak[g] = cur[g]; }
      else if (k === 1) { a -= s; cur[g] -= s; }
      else if (k === 2) r += s;
      else r -= s;
      allocAfter[i] = a;
      resAfter[i] = r;
      if (a > peakAlloc) peakAlloc = a;
      if (r > peakRes) peakRes = r;
    }
    addFact('peak allocated', fmtBytes(peakAlloc));
    addFact('peak reserved', fmtBytes(peakRes));
  }
  // Groups present: with memory in the history or in an allocated block.
  var blockGroupBytes = new Float64Array(G);
  D.blocks.forEach(function (b) { if (b[3] === 0 && b[4] >= 0) blockGroupBytes[b[4]] += b[2]; });
  var present = [];
  for (var gi = 0; gi < G; gi++) if (groupPeak[gi] > 0 || blockGroupBytes[gi] > 0) present.push(gi);
  // Stacking order, bottom to top: before the history, top sites, other sites, no site.
  var order = present.filter(function (g) { return g === 0; })
    .concat(present.filter(function (g) { return g >= 3; }))
    .concat(present.filter(function (g) { return g === 2; }))
    .concat(present.filter(function (g) { return g === 1; }));
  V.timings.prep = performance.now() - tPrep;

  // ---------------------------------------------------------------- legend
  var legend = document.getElementById('legend');
  var selectedGroup = -1;
  order.slice().reverse().forEach(function (g) {
    var item = el('div', { 'class': 'legend-item', 'data-group': String(g), title: groups[g].name });
    var sw = el('span', { 'class': 'swatch' });
    sw.style.background = groupColor(g);
    item.appendChild(sw);
    item.appendChild(el('span', { 'class': 'name' }, groups[g].name));
    item.appendChild(el('span', { 'class': 'bytes' }, fmtBytes(Math.max(groupPeak[g], blockGroupBytes[g]))));
    item.addEventListener('click', function () { showGroup(g); });
    legend.appendChild(item);
  });
  V.drawn.legend = order.length;

  // ---------------------------------------------------------------- details
  var details = document.getElementById('details');
  function showDetails(title, rows) {
    details.innerHTML = '';
    details.appendChild(el('h3', null, title));
    var dl = el('dl');
    rows.forEach(function (r) {
      if (r[1] === null || r[1] === undefined) return;
      dl.appendChild(el('dt', null, r[0]));
      dl.appendChild(el('dd', null, String(r[1])));
    });
    details.appendChild(dl);
  }
  function showGroup(g) {
    selectedGroup = g;
    Array.prototype.forEach.call(legend.children, function (c) {
      c.classList.toggle('selected', Number(c.getAttribute('data-group')) === g);
    });
    showDetails(groups[g].site >= 0 ? 'Allocation site' : groups[g].name, [
      ['site', groups[g].site >= 0 ? groups[g].name : null],
      ['peak (history)', H ? fmtBytes(groupPeak[g]) : null],
      ['live now', fmtBytes(blockGroupBytes[g])]
    ]);
    drawSegments();
  }

  // ---------------------------------------------------------------- tooltip
  var tip = document.getElementById('tooltip');
  function showTip(text, cx, cy) {
    tip.textContent = text;
    tip.style.display = 'block';
    var w = tip.offsetWidth, h = tip.offsetHeight;
    var x = cx + 14, y = cy + 14;
    if (x + w > window.innerWidth - 4) x = cx - w - 14;
    if (y + h > window.innerHeight - 4) y = cy - h - 14;
    tip.style.left = Math.max(4, x) + 'px';
    tip.style.top = Math.max(4, y) + 'px';
  }
  function hideTip() { tip.style.display = 'none'; }

  function setupCanvas(c, cssHeight) {
    var dpr = window.devicePixelRatio || 1;
    var w = c.clientWidth;
    c.style.height = cssHeight + 'px';
    c.width = Math.max(1, Math.round(w * dpr));
    c.height = Math.max(1, Math.round(cssHeight * dpr));
    var ctx = c.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    return { ctx: ctx, w: w, h: cssHeight };
  }

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

  // ---------------------------------------------------------------- segment map
  var segmap = document.getElementById('segmap');
  var ROW_H = 16, ROW_GAP = 4, SEG_GAP = 3, MIN_SEG_PX = 6;
  var segLayout = null;
  var selectedBlock = -1;
  var blocksBySeg = [];
  D.segments.forEach(function () { blocksBySeg.push([]); });
  D.blocks.forEach(function (b, i) { if (blocksBySeg[b[0]]) blocksBySeg[b[0]].push(i); });
  var STATE_NAMES = ['allocated', 'pending free', 'free'];

  function blockColor(b) {
    if (b[3] === 2) return '#eaeef2';
    if (b[3] === 1) return '#fb8f44';
    return b[4] >= 0 ? groupColor(b[4]) : '#bfc5cc';
  }
  function isLeaked(b) { return b[6] >= 0 && !!D.tensors[b[6]].leakedFrom; }

  function drawSegments() {
    var t0 = performance.now();
    var S = D.segments.length;
    var w = segmap.clientWidth;
    if (S === 0) {
      var cv0 = setupCanvas(segmap, 40);
      cv0.ctx.fillStyle = '#656d76';
      cv0.ctx.font = '13px system-ui, sans-serif';
      cv0.ctx.fillText('No segments: nothing is reserved.', 8, 24);
      V.drawn.segments = 0;
      V.drawn.blocks = 0;
      segLayout = null;
      return;
    }
    // Bytes per pixel: every segment at least MIN_SEG_PX wide, and all of them in two
    // rows for a few segments, up to 24 for many.
    var total = 0;
    D.segments.forEach(function (s) { total += s[1]; });
    var targetRows = Math.min(24, Math.max(2, Math.ceil(S / 2)));
    var bpp = Math.max(total / (w * targetRows), 1);
    var segPx = D.segments.map(function (s) { return Math.max(MIN_SEG_PX, s[1] / bpp); });
    // Flow the segments into rows, wrapping long ones.
    var pieces = []; // [seg, row, x, width, offsetPx]
    var row = 0, x = 0;
    for (var si = 0; si < S; si++) {
      var left = segPx[si], off = 0;
      if (x > 0 && x + Math.min(left, 40) > w) { row++; x = 0; }
      while (left > 0) {
        var take = Math.min(left, w - x);
        pieces.push([si, row, x, take, off]);
        left -= take; off += take; x += take;
        if (left > 0 || x >= w - SEG_GAP) { if (left > 0 || x >= w) { row++; x = 0; } }
      }
      x += SEG_GAP;
      if (x >= w) { row++; x = 0; }
    }
    var rows = row + (x > 0 ? 1 : 0);
    var cv = setupCanvas(segmap, Math.max(1, rows) * (ROW_H + ROW_GAP));
    var ctx = cv.ctx;
    ctx.clearRect(0, 0, cv.w, cv.h);
    var rowRects = [];
    for (var rr = 0; rr < rows; rr++) rowRects.push([]);
    var piecesBySeg = [];
    for (var s2 = 0; s2 < S; s2++) piecesBySeg.push([]);
    pieces.forEach(function (p) { piecesBySeg[p[0]].push(p); });
    var drawnBlocks = 0;
    var leakedRects = [];
    for (var s3 = 0; s3 < S; s3++) {
      var seg = D.segments[s3], scale = segPx[s3] / seg[1];
      var ps = piecesBySeg[s3];
      // Segment background.
      ps.forEach(function (p) {
        ctx.fillStyle = '#d0d7de';
        ctx.fillRect(p[2], p[1] * (ROW_H + ROW_GAP), p[3], ROW_H);
      });
      var bl = blocksBySeg[s3];
      for (var bi = 0; bi < bl.length; bi++) {
        var idx = bl[bi], b = D.blocks[idx];
        var b0 = b[1] * scale, b1 = (b[1] + b[2]) * scale;
        ctx.fillStyle = blockColor(b);
        var dim = selectedGroup >= 0 && b[4] !== selectedGroup && b[3] === 0;
        for (var pi = 0; pi < ps.length; pi++) {
          var p = ps[pi], p0 = p[4], p1 = p[4] + p[3];
          var lo = Math.max(b0, p0), hi = Math.min(b1, p1);
          if (hi <= lo) continue;
          var rx = p[2] + (lo - p0), ry = p[1] * (ROW_H + ROW_GAP), rw = Math.max(hi - lo, 0.5);
          ctx.globalAlpha = dim ? 0.3 : 1;
          ctx.fillRect(rx, ry, rw, ROW_H);
          ctx.globalAlpha = 1;
          if (rw >= 3) {
            ctx.fillStyle = '#ffffff';
            ctx.fillRect(rx + rw - 0.5, ry, 0.5, ROW_H);
            ctx.fillStyle = blockColor(b);
          }
          rowRects[p[1]].push([rx, rx + rw, idx]);
          if (isLeaked(b) || idx === selectedBlock) leakedRects.push([rx, ry, rw, idx]);
        }
        drawnBlocks++;
      }
    }
    // Leaked tensors: a red frame (a red mark when too thin to frame); the selected
    // block: a blue one.
    leakedRects.forEach(function (r) {
      var color = r[3] === selectedBlock ? '#0969da' : '#d1242f';
      if (r[2] >= 6) {
        ctx.lineWidth = 2;
        ctx.strokeStyle = color;
        ctx.strokeRect(r[0] + 1, r[1] + 1, r[2] - 2, ROW_H - 2);
      } else {
        ctx.fillStyle = color;
        ctx.fillRect(r[0] + r[2] / 2 - 1.5, r[1], 3, 4);
        ctx.fillRect(r[0] + r[2] / 2 - 1.5, r[1] + ROW_H - 4, 3, 4);
      }
    });
    rowRects.forEach(function (list) { list.sort(function (a, b) { return a[0] - b[0]; }); });
    segLayout = { rowRects: rowRects, rows: rows, pieces: pieces };
    V.drawn.segments = S;
    V.drawn.blocks = drawnBlocks;
    V.drawn.segmentRows = rows;
    V.timings.segments = performance.now() - t0;
  }
  function blockAt(px, py) {
    if (!segLayout) return -1;
    var r = Math.floor(py / (ROW_H + ROW_GAP));
    if (r < 0 || r >= segLayout.rows || py - r * (ROW_H + ROW_GAP) > ROW_H) return -1;
    var list = segLayout.rowRects[r], lo = 0, hi = list.length - 1, best = -1;
    while (lo <= hi) {
      var m = (lo + hi) >> 1;
      if (list[m][0] <= px) { best = m; lo = m + 1; } else hi = m - 1;
    }
    // Tiny blocks share pixels: take the last one starting at or before px that covers it.
    for (var j = best; j >= 0 && j > best - 8; j--) if (list[j][1] >= px) return list[j][2];
    return -1;
  }
  function blockLines(i) {
    var b = D.blocks[i], seg = D.segments[b[0]];
    var out = [];
    var s = siteName(b[5]);
    if (s) out.push('site ' + s);
    out.push(STATE_NAMES[b[3]] + ' block, ' + fmtBytes(b[2]) + ' at ' + hex(seg[0] + b[1]));
    if (b[6] >= 0) {
      var t = D.tensors[b[6]];
      out.push('tensor ' + t.dtype + '[' + t.shape.join(', ') + '], ' + fmtBytes(t.bytes) + ' (id ' + t.id + ')');
      if (t.scope) out.push('in scope `' + t.scope.name + '` (' + t.scope.site + ')');
      if (t.leakedFrom) out.push('LEAKED from scope `' + t.leakedFrom.name + '` (' + t.leakedFrom.site + ')');
    }
    out.push('segment ' + hex(seg[0]) + ', ' + fmtBytes(seg[1]) + ', ' + seg[3] + ' pool, stream ' + seg[2]);
    return out;
  }
  function showBlock(i) {
    selectedBlock = i;
    var b = D.blocks[i], seg = D.segments[b[0]], t = b[6] >= 0 ? D.tensors[b[6]] : null;
    showDetails(t ? (t.leakedFrom ? 'Leaked tensor' : 'Tensor') : 'Block', [
      ['site', siteName(b[5])],
      ['state', STATE_NAMES[b[3]]],
      ['size', fmtBytes(b[2])],
      ['address', hex(seg[0] + b[1])],
      ['dtype', t ? t.dtype : null],
      ['shape', t ? '[' + t.shape.join(', ') + ']' : null],
      ['tensor id', t ? t.id : null],
      ['scope', t && t.scope ? t.scope.name + ' (' + t.scope.site + ')' : null],
      ['leaked from', t && t.leakedFrom ? t.leakedFrom.name + ' (' + t.leakedFrom.site + ')' : null],
      ['segment', hex(seg[0]) + ', ' + fmtBytes(seg[1]) + ', ' + seg[3] + ', stream ' + seg[2]]
    ]);
    drawSegments();
    markRow(i);
  }
  segmap.addEventListener('mousemove', function (ev) {
    var rect = segmap.getBoundingClientRect();
    var i = blockAt(ev.clientX - rect.left, ev.clientY - rect.top);
    if (i < 0) { hideTip(); return; }
    showTip(blockLines(i).join('\n'), ev.clientX, ev.clientY);
  });
  segmap.addEventListener('mouseleave', hideTip);
  segmap.addEventListener('click', function (ev) {
    var rect = segmap.getBoundingClientRect();
    var i = blockAt(ev.clientX - rect.left, ev.clientY - rect.top);
    if (i >= 0) showBlock(i);
  });
  V.blockPoint = function (i) {
    if (!segLayout) return null;
    for (var r = 0; r < segLayout.rowRects.length; r++) {
      var list = segLayout.rowRects[r];
      for (var j = 0; j < list.length; j++) {
        if (list[j][2] === i) {
          var rect = segmap.getBoundingClientRect();
          return { x: rect.left + (list[j][0] + list[j][1]) / 2, y: rect.top + r * (ROW_H + ROW_GAP) + ROW_H / 2 };
        }
      }
    }
    return null;
  };

  // ---------------------------------------------------------------- live tensors
  var tbody = document.querySelector('#tensors tbody');
  var rowOfBlock = {};
  var live = [];
  D.blocks.forEach(function (b, i) { if (b[3] === 0) live.push(i); });
  live.sort(function (a, b) {
    var la = isLeaked(D.blocks[a]) ? 1 : 0, lb = isLeaked(D.blocks[b]) ? 1 : 0;
    return lb - la || D.blocks[b][2] - D.blocks[a][2];
  });
  var MAX_ROWS = 500;
  live.slice(0, MAX_ROWS).forEach(function (i) {
    var b = D.blocks[i], t = b[6] >= 0 ? D.tensors[b[6]] : null;
    var tr = el('tr', { 'data-block': String(i) });
    if (t && t.leakedFrom) tr.className = 'leaked';
    tr.appendChild(el('td', null, t ? (t.leakedFrom ? 'leaked' : 'live') : 'allocated'));
    tr.appendChild(el('td', { 'class': 'num' }, fmtBytes(b[2])));
    tr.appendChild(el('td', null, t ? t.dtype + '[' + t.shape.join(', ') + ']' : ''));
    tr.appendChild(el('td', { 'class': 'site' }, siteName(b[5]) || ''));
    tr.appendChild(el('td', null, t && t.leakedFrom ? t.leakedFrom.name : (t && t.scope ? t.scope.name : '')));
    tr.addEventListener('click', function () { showBlock(i); });
    rowOfBlock[i] = tr;
    tbody.appendChild(tr);
  });
  var caption = document.getElementById('tensors-caption');
  var nLeaked = live.filter(function (i) { return isLeaked(D.blocks[i]); }).length;
  caption.textContent = live.length + ' allocated block' + (live.length === 1 ? '' : 's') +
    (nLeaked ? ', ' + nLeaked + ' leaked (red)' : '') + (live.length > MAX_ROWS ? '; the ' + MAX_ROWS + ' largest shown' : '');
  V.drawn.tensorRows = Math.min(live.length, MAX_ROWS);
  function markRow(i) {
    Array.prototype.forEach.call(tbody.querySelectorAll('tr.selected'), function (r) { r.classList.remove('selected'); });
    if (rowOfBlock[i]) rowOfBlock[i].classList.add('selected');
  }

  // ---------------------------------------------------------------- go
  function drawAll() { drawChart(); drawSegments(); }
  var resizeTimer = null;
  window.addEventListener('resize', function () {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(drawAll, 100);
  });
  drawAll();
  V.timings.total = performance.now();
  V.timings.script = performance.now() - tStart;
  V.ready = true;
})();
