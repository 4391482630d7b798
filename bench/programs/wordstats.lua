-- Word and word-pair frequencies of a text, with Lua tables and strings.
-- usage: lua5.4 wordstats.lua TEXT      (output format: see wordstats.rb)
local path = assert(arg[1], "usage: lua5.4 wordstats.lua TEXT")
local words, pairs_, lines, total = {}, {}, 0, 0
local distinct, npairs = 0, 0
for line in io.lines(path) do
  lines = lines + 1
  local prev
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
  end
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

io.write("lines ", lines, "\nwords ", total, "\ndistinct ", distinct, "\npairs ", npairs, "\n")
top(words, "word")
top(pairs_, "pair")
