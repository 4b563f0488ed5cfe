"""Pure renderers of typed results: Markdown, HTML with inline SVG plots, JSON, JUnit."""
