"""How results look: Jupyter HTML, markdown, terminal text and marked quotes; no core module imports this package.

`html` builds the notebook HTML, `search` the text and markdown of a search, `quotes` a cited passage
as HTML, `transcript` a conversation as text, `progress` the notebook progress bar, and `jupyter`
registers the HTML and markdown of the core's result types with a running IPython.
"""
