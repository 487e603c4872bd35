"""The run machinery: the command line, one-line errors, checkpoint files, tracking, the run
summary and the guard callbacks. The template maintains it; ``copier update`` keeps it current.
"""
