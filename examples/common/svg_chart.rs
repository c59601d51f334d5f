//! The frame of the examples' memory charts, in the manner of PyTorch's memory_viz: an
//! SVG with a title, a byte axis with four grid lines, points along the horizontal axis,
//! and the lines, areas and dashed rules drawn on it. The examples add their own series
//! and legends.
//!
//! Shared by the `train` and `gpt` examples (`#[path = "common/svg_chart.rs"]`).

use std::fmt::Write as _;

use gpuscope::format_bytes;

/// A chart being drawn: `points` samples from left to right, bytes from 0 to `max` upwards.
pub struct Chart {
    svg: String,
    left: f64,
    top: f64,
    plot: (f64, f64),
    last: usize,
    max: f64,
}

impl Chart {
    /// A chart of `size` (width, height) with `margins` (left, right, top, bottom) around
    /// the plot, for `points` samples of at most `max` bytes, titled `title`.
    pub fn new(
        size: (f64, f64),
        margins: (f64, f64, f64, f64),
        points: usize,
        max: usize,
        title: &str,
    ) -> Chart {
        let (w, h) = size;
        let (left, right, top, bottom) = margins;
        let mut chart = Chart {
            svg: String::new(),
            left,
            top,
            plot: (w - left - right, h - top - bottom),
            last: points.max(2) - 1,
            max: max.max(1) as f64,
        };
        chart.element(&format!(
            r##"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">"##
        ));
        chart.element(&format!(
            r##"<rect width="{w}" height="{h}" fill="#ffffff"/>"##
        ));
        chart.element(&format!(
            r##"<text x="{left}" y="22" font-size="15">{}</text>"##,
            escape(title)
        ));
        for k in 0..=4 {
            let v = (chart.max * k as f64 / 4.0) as usize;
            let y = chart.y(v);
            chart.element(&format!(
                r##"<line x1="{left}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#e5e5e5"/><text x="{:.1}" y="{:.1}" text-anchor="end" fill="#555">{}</text>"##,
                left + chart.plot.0,
                left - 6.0,
                y + 4.0,
                format_bytes(v)
            ));
        }
        chart
    }

    /// The horizontal position of sample `i`.
    pub fn x(&self, i: usize) -> f64 {
        self.left + self.plot.0 * i as f64 / self.last as f64
    }

    /// The vertical position of `bytes`.
    pub fn y(&self, bytes: usize) -> f64 {
        self.top + self.plot.1 * (1.0 - bytes as f64 / self.max)
    }

    /// The left edge, top edge, width and height of the plot.
    pub fn plot_area(&self) -> (f64, f64, f64, f64) {
        (self.left, self.top, self.plot.0, self.plot.1)
    }

    /// A dashed vertical rule at sample `i`.
    pub fn rule(&mut self, i: usize, color: &str) {
        let (x, top, bottom) = (self.x(i), self.top, self.top + self.plot.1);
        self.element(&format!(
            r##"<line x1="{x:.1}" y1="{top}" x2="{x:.1}" y2="{bottom:.1}" stroke="{color}" stroke-dasharray="3,3"/>"##
        ));
    }

    /// A line through `values`, one per sample; `style` holds its SVG attributes.
    pub fn line(&mut self, values: impl IntoIterator<Item = usize>, style: &str) {
        let points: Vec<String> = values
            .into_iter()
            .enumerate()
            .map(|(i, v)| format!("{:.1},{:.1}", self.x(i), self.y(v)))
            .collect();
        self.element(&format!(
            r##"<polyline points="{}" fill="none" {style}/>"##,
            points.join(" ")
        ));
    }

    /// The area between `upper` and `lower` (one value per sample each), with `style`'s
    /// SVG attributes and, when given, a tooltip.
    pub fn area(&mut self, upper: &[usize], lower: &[usize], style: &str, tooltip: Option<&str>) {
        let mut d = String::new();
        for (i, &v) in upper.iter().enumerate() {
            let _ = write!(
                d,
                "{}{:.1},{:.1} ",
                if i == 0 { "M" } else { "L" },
                self.x(i),
                self.y(v)
            );
        }
        for (i, &v) in lower.iter().enumerate().rev() {
            let _ = write!(d, "L{:.1},{:.1} ", self.x(i), self.y(v));
        }
        let title = tooltip.map_or(String::new(), |t| format!("<title>{}</title>", escape(t)));
        self.element(&format!(r##"<path d="{d}Z" {style}>{title}</path>"##));
    }

    /// The horizontal axis, with `label` under it.
    pub fn axis(&mut self, label: &str) {
        let (left, top, pw, ph) = self.plot_area();
        self.element(&format!(
            r##"<line x1="{left}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#333"/><text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#555">{}</text>"##,
            top + ph,
            left + pw,
            top + ph,
            left + pw / 2.0,
            top + ph + 18.0,
            escape(label)
        ));
    }

    /// Adds one SVG element (a legend entry, a label) as it is.
    pub fn element(&mut self, element: &str) {
        self.svg.push_str(element);
        self.svg.push('\n');
    }

    /// The finished SVG document.
    pub fn finish(mut self) -> String {
        self.svg.push_str("</svg>\n");
        self.svg
    }
}

/// `s` with the characters XML gives a meaning escaped.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
