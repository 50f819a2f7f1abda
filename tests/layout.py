"""What a reader of a page would stop at, measured in the browser from the DOM's boxes
(no pixels compared: robust to fonts and timing). `problems(page)` lists, for the page's
main area as it is drawn now, and for each frame on it:

- an element wider than its column (its box past the column's edge, with no scroller
  between them), a page that scrolls sideways, a tab bar that hides tabs;
- a cut label: text whose box clips it (a label, a button, a placeholder narrower than
  its words) without a `title` to read it whole;
- text covering text: the boxes of two pieces of text that overlap.
"""

from __future__ import annotations

PROBLEMS_JS = r"""
() => {
  const main = document.querySelector('[data-testid=stMain]') || document.body;
  const out = [];
  const say = (kind, e, more) => out.push(
    `${kind}: ${(e.getAttribute('data-testid') || e.tagName.toLowerCase())} `
    + `"${((e.innerText || e.textContent || e.placeholder || '') + '').trim().slice(0, 50)}"`
    + (more ? ` (${more})` : ''));
  // the part of box `r` of element `e` that its clipping ancestors let show (null: none)
  const seen = (e, r) => {
    let [l, t, rt, b] = [r.left, r.top, r.right, r.bottom];
    for (let a = e.parentElement; a && a !== main && a !== document.body; a = a.parentElement) {
      const s = getComputedStyle(a);
      if (s.overflowX === 'visible' && s.overflowY === 'visible') continue;
      const c = a.getBoundingClientRect();
      l = Math.max(l, c.left); t = Math.max(t, c.top);
      rt = Math.min(rt, c.right); b = Math.min(b, c.bottom);
      if (rt - l < 1 || b - t < 1) return null;
    }
    return { left: l, top: t, right: rt, bottom: b };
  };
  const shown = e => {
    const r = e.getBoundingClientRect();
    if (r.width < 1 || r.height < 1) return false;
    if (!e.checkVisibility({ opacityProperty: true, visibilityProperty: true,
                             contentVisibilityAuto: true })) return false;
    return seen(e, r) !== null;
  };
  const skip = e => e.closest('svg, .js-plotly-plot, [data-testid=stDataFrame], '
    + '[data-testid=stVegaLiteChart], [data-testid=stTooltipContent], [role=tooltip], '
    + '[data-testid=stToast], [data-baseweb=popover]');
  const column = e => (e.parentElement && e.parentElement.closest(
    '[data-testid=stColumn], [data-testid=stMainBlockContainer], '
    + '[data-testid=stExpanderDetails], [data-testid=stTabPanel]')) || main;
  const clips = s => s.overflowX !== 'visible';
  // 1. wider than its column; the page and the tab bars never scroll sideways
  const doc = document.documentElement;
  if (doc.scrollWidth > doc.clientWidth + 1) say('page scrolls sideways', doc, doc.scrollWidth);
  for (const bar of main.querySelectorAll('[role=tablist]'))
    if (shown(bar) && bar.scrollWidth > bar.clientWidth + 1) say('tabs hidden', bar);
  const elements = [...main.querySelectorAll('*')].filter(e => !skip(e) && shown(e));
  for (const e of elements) {
    const col = column(e);
    let clipped = false;
    for (let a = e.parentElement; a && a !== col && a !== main; a = a.parentElement)
      if (clips(getComputedStyle(a))) { clipped = true; break; }
    if (clipped) continue;  // inside a scroller, or a box that clips (check 2)
    const r = e.getBoundingClientRect(), c = col.getBoundingClientRect();
    if (r.right > c.right + 1.5 || r.left < c.left - 1.5)
      say('wider than its column', e, `${Math.round(r.left)}–${Math.round(r.right)} in `
        + `${Math.round(c.left)}–${Math.round(c.right)}`);
  }
  // 2. cut labels without a tooltip: a text's box clipped by a box of its own (a
  // label, a button: Streamlit clips them with an ellipsis) within a few levels up
  const titled = e => !!e.closest('[title]');
  const texts = [];
  const walker = document.createTreeWalker(main, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const e = n.parentElement;
    if (!n.textContent.trim() || !e || skip(e)) continue;
    const range = document.createRange();
    range.selectNodeContents(n);
    const rects = [...range.getClientRects()].filter(r => r.width > 2 && r.height > 2);
    if (rects.length && e.checkVisibility({ opacityProperty: true, visibilityProperty: true,
                                            contentVisibilityAuto: true }))
      texts.push({ e, rects });
  }
  for (const { e } of texts) {
    if (titled(e)) continue;
    for (let a = e, up = 0; a && up < 5 && a !== main; a = a.parentElement, up++) {
      if (a.matches('[data-testid=stElementContainer], [data-testid=stCode], pre')) break;
      const s = getComputedStyle(a);
      const scroller = s.overflowX === 'auto' || s.overflowX === 'scroll';
      if (scroller) break;
      if ((clips(s) || s.textOverflow === 'ellipsis') && a.clientWidth > 0
          && a.scrollWidth > a.clientWidth + 1 && seen(a, a.getBoundingClientRect())) {
        say('cut label', e); break;
      }
    }
  }
  const ruler = document.createElement('canvas').getContext('2d');
  for (const input of main.querySelectorAll('input[placeholder], textarea[placeholder]')) {
    if (!shown(input) || input.value || !input.placeholder || titled(input)) continue;
    const s = getComputedStyle(input);
    ruler.font = `${s.fontStyle} ${s.fontWeight} ${s.fontSize} ${s.fontFamily}`;
    const room = input.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight);
    if (ruler.measureText(input.placeholder).width > room + 1)
      say('cut placeholder', input, input.placeholder);
  }
  // 3. text covering text: the line boxes of two text nodes overlap
  const boxes = [];
  for (const { e, rects } of texts)
    for (const box of rects) {
      const r = seen(e, box);
      if (r) boxes.push({ r, e });
    }
  boxes.sort((a, b) => a.r.top - b.r.top);
  const said = new Set();
  for (let i = 0; i < boxes.length; i++) {
    for (let j = i + 1; j < boxes.length && boxes[j].r.top < boxes[i].r.bottom; j++) {
      const a = boxes[i], b = boxes[j];
      if (a.e === b.e || a.e.contains(b.e) || b.e.contains(a.e)) continue;
      const w = Math.min(a.r.right, b.r.right) - Math.max(a.r.left, b.r.left);
      const h = Math.min(a.r.bottom, b.r.bottom) - Math.max(a.r.top, b.r.top);
      if (w > 3 && h > 3) {
        const key = a.e.textContent.slice(0, 30) + '|' + b.e.textContent.slice(0, 30);
        if (said.has(key)) continue;
        said.add(key);
        say('text covers text', a.e, b.e.textContent.trim().slice(0, 40));
      }
    }
  }
  return out;
}
"""


def problems(page) -> list[str]:
    """What the page's main area shows cut, too wide or overlapping, now, and the same in
    each frame on it (the editor, a graph's pan-and-zoom frame)."""
    from playwright.sync_api import Error

    found = page.evaluate(PROBLEMS_JS)
    for frame in page.frames:
        if frame is page.main_frame or frame.is_detached():
            continue
        try:
            found += [f"in a frame: {said}" for said in frame.evaluate(PROBLEMS_JS)]
        except Error:  # a frame that went away meanwhile
            continue
    return found
