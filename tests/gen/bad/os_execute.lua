-- expect: tests/gen/bad/os_execute.lua:2: error: 'os' is not available in a spec: specs are data, run in a sandbox that offers only math, string, table, import and the basic functions
os.execute("touch /tmp/dsagen-escaped")
return {}
