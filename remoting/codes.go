package remoting

// Request codes (RequestCode in apache/rocketmq) a broker and a name server
// answer for the Apache clients.
const (
	CodeSendMessage            int16 = 10
	CodePullMessage            int16 = 11
	CodeQueryMessage           int16 = 12
	CodeQueryConsumerOffset    int16 = 14
	CodeUpdateConsumerOffset   int16 = 15
	CodeSearchOffsetByTime     int16 = 29
	CodeGetMaxOffset           int16 = 30
	CodeGetMinOffset           int16 = 31
	CodeViewMessageByID        int16 = 33
	CodeHeartbeat              int16 = 34
	CodeUnregisterClient       int16 = 35
	CodeConsumerSendMsgBack    int16 = 36
	CodeGetConsumerListByGroup int16 = 38
	CodeNotifyConsumerIDs      int16 = 40 // broker → client: a group's members changed
	CodeGetRouteInfoByTopic    int16 = 105
	CodeSendMessageV2          int16 = 310
	CodeSendBatchMessage       int16 = 320
)

// Response codes (ResponseCode and RemotingSysResponseCode).
const (
	CodeSuccess               int16 = 0
	CodeSystemError           int16 = 1
	CodeSystemBusy            int16 = 2
	CodeRequestNotSupported   int16 = 3
	CodeFlushDiskTimeout      int16 = 10
	CodeSlaveNotAvailable     int16 = 11
	CodeFlushSlaveTimeout     int16 = 12
	CodeMessageIllegal        int16 = 13
	CodeServiceNotAvailable   int16 = 14
	CodeVersionNotSupported   int16 = 15
	CodeNoPermission          int16 = 16
	CodeTopicNotExist         int16 = 17
	CodePullNotFound          int16 = 19
	CodePullRetryImmediately  int16 = 20
	CodePullOffsetMoved       int16 = 21
	CodeQueryNotFound         int16 = 22
	CodeSubscriptionParseFail int16 = 23
	CodeSubscriptionNotExist  int16 = 24
	CodeSubscriptionNotLatest int16 = 25
	CodeSubscriptionGroupNone int16 = 26
)
