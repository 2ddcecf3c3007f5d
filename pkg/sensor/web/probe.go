package web

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/chromedp"
)

// The probe is a tree of the page's elements. It is built from the DOM, because the
// accessibility tree that CDP returns carries no id or data-testid attributes, and the
// gates look views up by those. The accessibility tree is joined in by backend node id
// for what only the browser can compute: implicit roles and accessible names.
//
// Shape (empty fields are left out):
//
//	{"title": "...", "nodes": 42, "truncated": true,
//	 "tree": {"tag": "html", "children": [{"tag": "button", "id": "save",
//	          "data-testid": "save-btn", "role": "button", "name": "Save",
//	          "children": [...]}]}}
//
// Page text reaches the probe only through accessible names: the screenshot carries the
// rest, and every extra text field would be one more place for app content to pose as
// instructions.

const (
	nodeElement = 1
	nodeText    = 3
)

// skippedTags hold no visible content or only machinery; leaving them out keeps the probe
// about what the user sees. The freeze style the sensor injects is among them.
var skippedTags = map[string]bool{
	"head": true, "script": true, "style": true, "noscript": true, "template": true,
	"meta": true, "link": true, "base": true, "title": true,
}

// uninformativeRoles are accessibility roles that say nothing a gate could check.
var uninformativeRoles = map[string]bool{
	"": true, "generic": true, "none": true, "presentation": true, "StaticText": true,
	"InlineTextBox": true, "LineBreak": true, "Ignored": true,
}

// nameFromContent lists the tags and roles whose accessible name is their text, for the
// fallback used when the browser computed no name.
var nameFromContent = map[string]bool{
	"button": true, "a": true, "link": true, "h1": true, "h2": true, "h3": true, "h4": true,
	"h5": true, "h6": true, "heading": true, "label": true, "summary": true, "option": true,
	"legend": true, "tab": true, "menuitem": true, "checkbox": true, "radio": true,
	"switch": true, "treeitem": true, "cell": true, "columnheader": true, "rowheader": true,
	"tooltip": true, "th": true, "td": true, "caption": true, "figcaption": true,
}

// maxCollect bounds how much text the name fallback gathers, since the result is cut to
// sensor.MaxLabel anyway and a page can hold megabytes of text.
const maxCollect = 4096

type axInfo struct {
	role, name string
}

type probeBuilder struct {
	ax        map[cdp.BackendNodeID]axInfo
	max       int
	count     int
	truncated bool
}

// probeAction reads the DOM and the accessibility tree of the tab and builds the probe.
func probeAction(maxNodes int) chromedp.Action[map[string]any] {
	return func(ctx context.Context, t *chromedp.Target) (map[string]any, error) {
		doc, err := cdp.Call(ctx, t, dom.GetDocument, dom.GetDocumentParams{Depth: new(int64(-1)), Pierce: new(true)})
		if err != nil {
			return nil, fmt.Errorf("read DOM: %w", err)
		}
		axTree, err := cdp.Call(ctx, t, accessibility.GetFullAXTree, accessibility.GetFullAXTreeParams{})
		if err != nil {
			return nil, fmt.Errorf("read accessibility tree: %w", err)
		}
		title, err := chromedp.Evaluate[string]("document.title")(ctx, t)
		if err != nil {
			return nil, fmt.Errorf("read title: %w", err)
		}

		b := &probeBuilder{ax: axIndex(axTree.Nodes), max: maxNodes}
		out := map[string]any{}
		if title = collapse(title); title != "" {
			out["title"] = title
		}
		if doc.Root != nil {
			for _, c := range doc.Root.Children {
				if c.NodeType == nodeElement {
					if tree := b.element(c); tree != nil {
						out["tree"] = tree
					}
					break
				}
			}
		}
		out["nodes"] = b.count
		if b.truncated {
			out["truncated"] = true
		}
		return out, nil
	}
}

// axIndex keeps, per DOM node, the role and name Chromium computed, skipping nodes the
// accessibility tree ignores (hidden or purely presentational).
func axIndex(nodes []*accessibility.Node) map[cdp.BackendNodeID]axInfo {
	m := make(map[cdp.BackendNodeID]axInfo, len(nodes))
	for _, n := range nodes {
		if n == nil || n.Ignored || n.BackendDOMNodeID == 0 {
			continue
		}
		m[n.BackendDOMNodeID] = axInfo{role: axString(n.Role), name: axString(n.Name)}
	}
	return m
}

func axString(v *accessibility.Value) string {
	if v == nil || len(v.Value) == 0 {
		return ""
	}
	var s string
	if err := json.Unmarshal(v.Value, &s); err != nil {
		return ""
	}
	return s
}

// element converts one DOM element and its subtree. It returns nil for skipped elements
// and once the node budget is spent.
func (b *probeBuilder) element(n *cdp.Node) map[string]any {
	tag := strings.ToLower(n.LocalName)
	if tag == "" {
		tag = strings.ToLower(n.NodeName)
	}
	if skippedTags[tag] {
		return nil
	}
	if b.count >= b.max {
		b.truncated = true
		return nil
	}
	b.count++

	attrs := attributes(n.Attributes)
	ax := b.ax[n.BackendNodeID]
	e := map[string]any{"tag": tag}
	if v := attrs["id"]; v != "" {
		e["id"] = v
	}
	if v := attrs["data-testid"]; v != "" {
		e["data-testid"] = v
	}
	role := strings.TrimSpace(attrs["role"])
	if role == "" && !uninformativeRoles[ax.role] {
		role = ax.role
	}
	if role != "" {
		e["role"] = role
	}

	name := collapse(ax.name)
	for _, attr := range []string{"aria-label", "alt", "title"} {
		if name != "" {
			break
		}
		name = collapse(attrs[attr])
	}
	if name == "" && (nameFromContent[tag] || nameFromContent[role]) {
		var sb strings.Builder
		textContent(n, &sb)
		name = collapse(sb.String())
	}
	if name != "" {
		e["name"] = name
	}

	var children []any
	add := func(kids []*cdp.Node) {
		for _, c := range kids {
			if c.NodeType != nodeElement {
				continue
			}
			if ce := b.element(c); ce != nil {
				children = append(children, ce)
			}
		}
	}
	// Author shadow roots first: they are what renders; light-DOM children show
	// only where slotted. The browser's own shadow trees (inside inputs, media
	// controls) are implementation detail and stay out.
	for _, sr := range n.ShadowRoots {
		if sr.ShadowRootType != cdp.ShadowRootTypeUserAgent {
			add(sr.Children)
		}
	}
	add(n.Children)
	if len(children) > 0 {
		e["children"] = children
	}
	return e
}

func attributes(flat []string) map[string]string {
	m := make(map[string]string, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		m[strings.ToLower(flat[i])] = flat[i+1]
	}
	return m
}

// textContent appends the subtree's text, skipping non-rendered elements, up to maxCollect
// bytes.
func textContent(n *cdp.Node, sb *strings.Builder) {
	for _, c := range n.Children {
		if sb.Len() >= maxCollect {
			return
		}
		switch c.NodeType {
		case nodeText:
			writeCapped(sb, c.NodeValue)
		case nodeElement:
			if !skippedTags[strings.ToLower(c.LocalName)] {
				textContent(c, sb)
			}
		}
	}
}

// writeCapped appends s and a separating space while sb is below maxCollect bytes,
// cutting s at a rune boundary.
func writeCapped(sb *strings.Builder, s string) {
	room := maxCollect - sb.Len()
	if room <= 0 {
		return
	}
	if len(s) > room {
		for room > 0 && !utf8.RuneStart(s[room]) {
			room--
		}
		s = s[:room]
	}
	sb.WriteString(s)
	sb.WriteByte(' ')
}

// collapse normalises whitespace the way a browser renders it in most contexts.
func collapse(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
