"""The web pages: Jinja2 templates and static files served by the API application (``web.pages``).

Everything a page needs is served locally (styles, scripts, and plotly's JavaScript from the installed
plotly package): the pages work without any network access.
"""
