"""The request compiler (layer 2, pure): a branch's system text, tools and view to one request, rendered block by
block to canonical JSON pieces (the one place a request is assembled).
"""
