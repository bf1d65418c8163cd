# Test an ImageNet-1k EVT-L on ImageNet-V2 (matched frequency; same 1000 classes). Its
# folders are named 0..999 by label, which a directory scan would sort as text, so the
# annotation file lists labels explicitly; make it once with
#   cd data/imagenetv2 && find . -name '*.jpeg' | sed 's|^\./||' \
#     | awk -F/ '{print $0" "$1}' > meta.txt
_base_ = './evt-l_8xb128_in1k.py'

test_dataloader = dict(
    dataset=dict(_scope_='mmpretrain',
                 _delete_=True, type='CustomDataset', data_root='data/imagenetv2',
                 ann_file='meta.txt', data_prefix='', pipeline={{_base_.test_pipeline}}))
test_evaluator = dict(type='Accuracy', topk=(1, 5))
