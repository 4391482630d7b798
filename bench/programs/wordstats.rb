# Word and word-pair frequencies of a text, with Ruby hashes and strings.
# usage: ruby wordstats.rb TEXT
# Output (the same for wordstats.pl, .lua and .awk):
#   lines L / words W / distinct D / pairs P / shapes S (distinct lines once
#   their words are sorted), then the 10 most frequent words
#   and the 10 most frequent adjacent pairs, as "word W N" and "pair W1 W2 N",
#   by count descending and then by bytes ascending.
path = ARGV.fetch(0)
words = Hash.new(0)
pairs = Hash.new(0)
shapes = Hash.new(0)
lines = 0
total = 0
File.foreach(path) do |line|
  w = line.split
  lines += 1
  total += w.size
  w.each { |x| words[x] += 1 }
  (1...w.size).each { |i| pairs["#{w[i - 1]} #{w[i]}"] += 1 }
  shapes[w.sort.join(',')] += 1
end

def top(hash, label)
  hash.sort_by { |key, count| [-count, key] }.first(10).each { |key, count| puts "#{label} #{key} #{count}" }
end

puts "lines #{lines}", "words #{total}", "distinct #{words.size}", "pairs #{pairs.size}", "shapes #{shapes.size}"
top(words, 'word')
top(pairs, 'pair')
