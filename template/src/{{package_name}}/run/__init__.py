"""The examples' run machinery: the template maintains it and ``copier update`` keeps it current."""
