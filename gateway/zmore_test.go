package gateway

import "testing"

func TestZSetMore(t *testing.T) {
	runOnAtomic(t, []step{
		cmd("ZADD z 1 a 2 b 3 c", "(integer) 3"),
		cmd("ZADD y 2 b 3 c", "(integer) 2"),
		cmd("ZRANGESTORE d z 1 -1", "(integer) 2"),
		cmd("ZRANGE d 0 -1 WITHSCORES", "1) \"b\"\n2) \"2\"\n3) \"c\"\n4) \"3\""),
		cmd("ZRANGESTORE d z 0 -1 WITHSCORES", "(error) ERR syntax error"),
		cmd("ZINTERCARD 2 z y", "(integer) 2"),
		cmd("ZINTERCARD 2 z y LIMIT 1", "(integer) 1"),
		cmd("ZINTERCARD 0 z", "(error) ERR numkeys should be greater than 0"),
		cmd("ZINTERCARD 1 z LIMIT -1", "(error) ERR LIMIT can't be negative"),
		cmd("ZRANDMEMBER nope", "(nil)"),
		cmd("ZRANDMEMBER z 0", "(empty array)"),
		cmd("ZRANDMEMBER z -9223372036854775808", "(error) ERR value is out of range"),
		cmd("ZRANDMEMBER z 1 WITHSCORES x", "(error) ERR syntax error"),
	})
}
