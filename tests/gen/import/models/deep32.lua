-- A table nested 32 levels deep: the deepest an imported table may be (DSG_SPEC_TABLE_DEPTH).
return { { { { { { { { { { { { { { { { { { { { { { { { { { { { { { { { x = 1 } } } } } } } } } } } } } } } } } } } } } } } } } } } } } } } }
