-- Word and word-pair frequencies of a text, with Lua tables and strings.
-- usage: lua5.4 wordstats.lua TEXT      (output format: see wordstats.rb)
local path = assert(arg[1], "usage: lua5.4 wordstats.lua TEXT")
local words, pairs_, lines, total = {}, {}, 0, 0
local shapes, distinct, npairs, nshapes = {}, 0, 0, 0
for line in io.lines(path) do
  lines = lines + 1
  local prev, line_words = nil, {}
  for w in line:gmatch("%S+") do
    total = total + 1
    local n = words[w]
    if not n then distinct = distinct + 1; n = 0 end
    words[w] = n + 1
    if prev then
      local key = prev .. " " .. w
      local m = pairs_[key]
      if not m then npairs = npairs + 1; m = 0 end
      pairs_[key] = m + 1
    end
    prev = w
    line_words[#line_words + 1] = w
  end
  table.sort(line_words)
  local shape = table.concat(line_words, ",")
  if not shapes[shape] then nshapes = nshapes + 1; shapes[shape] = 0 end
  shapes[shape] = shapes[shape] + 1
end

local function top(counts, label)
  local keys = {}
  for key in pairs(counts) do keys[#keys + 1] = key end
  table.sort(keys, function(a, b)
    local ca, cb = counts[a], counts[b]
    if ca ~= cb then return ca > cb end
    return a < b
  end)
  for i = 1, math.min(10, #keys) do
    io.write(label, " ", keys[i], " ", counts[keys[i]], "\n")
  end
end

io.write("lines ", lines, "\nwords ", total, "\ndistinct ", distinct, "\npairs ", npairs, "\nshapes ", nshapes, "\n")
top(words, "word")
top(pairs_, "pair")
